//! COMMAND INFO of every collection / HyperLogLog / stream command matches redis-server 7.0: arity,
//! flags, legacy key range and ACL categories (what cluster clients route by), and COMMAND
//! GETKEYS finds the same keys.

use tessera_testkit::diff::*;

const COMMANDS: &str =
    "hset hsetnx hget hmget hmset hdel hexists hlen hkeys hvals hgetall hincrby \
hincrbyfloat hstrlen hrandfield hscan lpush rpush lpushx rpushx lpop rpop llen lrange lindex lset \
linsert lrem ltrim lpos lmove rpoplpush lmpop blpop brpop blmove brpoplpush blmpop sadd srem \
smembers sismember smismember scard spop srandmember smove sinter sintercard sunion sdiff \
sinterstore sunionstore sdiffstore sscan zadd zincrby zrem zcard zcount zlexcount zscore zmscore \
zrank zrevrank zrange zrevrange zrangebyscore zrevrangebyscore zrangebylex zrevrangebylex \
zrangestore zremrangebyrank zremrangebyscore zremrangebylex zpopmin zpopmax bzpopmin bzpopmax \
zmpop bzmpop zunion zinter zdiff zunionstore zinterstore zdiffstore zintercard zrandmember zscan \
pfadd pfcount pfmerge pfdebug pfselftest xadd xlen xrange xrevrange xdel xtrim xread xreadgroup \
xack xpending xclaim xautoclaim xsetid xgroup xinfo";

/// Commands whose key specs (flags, begin_search, find_keys) must equal redis-server's
/// exactly: every movable-keys command, and the two-key source/destination ones.
const KEY_SPECS_CHECKED: &str = "zunionstore zinterstore zdiffstore lmpop blmpop zmpop bzmpop \
sintercard zunion zinter zdiff zintercard zrangestore smove lmove blmove rpoplpush brpoplpush \
sinter sunion sdiff sinterstore sunionstore sdiffstore pfmerge blpop brpop xread xreadgroup \
xadd xclaim";

fn strings(r: &Reply) -> Vec<String> {
    let (Reply::Array(v) | Reply::Set(v)) = r else {
        panic!("{r:?}")
    };
    let mut out: Vec<String> = v
        .iter()
        .map(|x| match x {
            Reply::Simple(s) => s.clone(),
            Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    out.sort();
    out
}

#[test]
fn command_info_matches_redis() {
    let t = tessera();
    let r = redis();
    let (mut a, mut b) = (Conn::connect(t.port), Conn::connect(r.port));
    let mut checked = 0;
    let mut specs = 0;
    for name in COMMANDS.split_whitespace() {
        let (x, y) = command_info_pair(&mut a, &mut b, name);
        assert_eq!(x[1], y[1], "{name}: arity");
        assert_eq!(strings(&x[2]), strings(&y[2]), "{name}: flags");
        assert_eq!(x[3..6], y[3..6], "{name}: first/last/step");
        assert_eq!(strings(&x[6]), strings(&y[6]), "{name}: ACL categories");
        if KEY_SPECS_CHECKED.split_whitespace().any(|n| n == name) {
            assert_eq!(x[8], y[8], "{name}: key specs");
            specs += 1;
        }
        checked += 1;
    }
    eprintln!("{checked} commands match COMMAND INFO of redis-server ({specs} key specs)");
    assert_eq!(specs, KEY_SPECS_CHECKED.split_whitespace().count());
    for getkeys in [
        "ZUNIONSTORE dst 2 a b WEIGHTS 1 2",
        "ZINTERSTORE dst 3 a b c",
        "BLMPOP 0 2 a b LEFT",
        "ZMPOP 3 a b c MIN",
        "SINTERCARD 2 a b LIMIT 1",
        "SMOVE a b m",
        "BLPOP a b c 0",
        "PFMERGE d a b",
        "ZRANGESTORE d s 0 -1",
        "ZDIFFSTORE d 1 a",
        "ZUNION 2 a b WITHSCORES",
        "LMOVE a b LEFT RIGHT",
        "XREAD COUNT 2 BLOCK 0 STREAMS a b 0 $",
        "XREADGROUP GROUP g c NOACK STREAMS a b c > > 0",
        "XADD s MAXLEN ~ 5 * f v",
        "XGROUP CREATE s g $ MKSTREAM",
        "XINFO STREAM s FULL",
        "XAUTOCLAIM s g c 0 0",
    ] {
        let mut args = vec!["COMMAND", "GETKEYS"];
        args.extend(getkeys.split_whitespace());
        assert_eq!(a.cmd(&args), b.cmd(&args), "GETKEYS {getkeys}");
        args[1] = "GETKEYSANDFLAGS";
        assert_eq!(a.cmd(&args), b.cmd(&args), "GETKEYSANDFLAGS {getkeys}");
    }
}
