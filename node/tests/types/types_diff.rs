//! Differential tests: the same command scripts run against tessera-node and the real
//! redis-server 7.0, in RESP2 and RESP3; every reply must be identical (unordered replies are
//! compared after sorting, marked `~`).

use tessera_testkit::diff::*;

#[test]
fn hash_commands_match_redis() {
    diff_script(
        "hash",
        r#"
        hset h f1 v1 f2 v2
        hset h f1 x f3 v3
        hset h f1
        hsetnx h f1 y
        hsetnx h f9 y
        hget h f1
        hget h nope
        hget nokey f
        hmget h f1 nope f3
        hmget nokey a b
        hmset h a 1 b 2
        hlen h
        hlen nokey
        hexists h a
        hexists h zz
        hstrlen h f1
        hstrlen h nope
        hkeys h
        hvals h
        hgetall h
        hgetall nokey
        hkeys nokey
        hincrby h a 10
        hincrby h a -100
        hincrby h new 5
        hincrby h f1 1
        hincrby h a notanumber
        hincrby h a 9223372036854775807
        hincrbyfloat h fl 10.5
        hincrbyfloat h fl 0.1
        hincrbyfloat h fl -5
        hincrbyfloat h fl 1e3
        hincrbyfloat h f1 1
        hincrbyfloat h fl abc
        hdel h a b nope
        hdel nokey a
        hscan h 0
        hscan h 0 match f*
        hscan h 0 count 0
        hscan h abc
        hrandfield nokey
        hrandfield nokey 3
        hrandfield h 0
        hrandfield h 1 withvalues extra
        hrandfield h 1 foo
        set str x
        hset str a b
        hget str a
        hgetall str
        hdel h f1 f2 f3 f9 fl new
        exists h
        hget
        hset h
        object encoding h
        hset big a aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        object encoding big
        hset small a b
        object encoding small
        type small
        "#,
    );
}

#[test]
fn list_commands_match_redis() {
    diff_script(
        "list",
        r#"
        rpush l a b c d e
        lpush l z y
        lpushx nokey a
        rpushx nokey a
        lpushx l x
        rpushx l w
        llen l
        llen nokey
        lrange l 0 -1
        lrange l 2 4
        lrange l -3 -1
        lrange l 5 2
        lrange l 100 200
        lrange l -100 100
        lrange nokey 0 -1
        lrange l a b
        lindex l 0
        lindex l -1
        lindex l 100
        lindex nokey 0
        lset l 0 first
        lset l -1 last
        lset l 100 x
        lset nokey 0 x
        lrange l 0 -1
        linsert l before c c0
        linsert l after c c1
        linsert l before nope x
        linsert nokey before a b
        linsert l middle c x
        lrange l 0 -1
        rpush d a b a c a d a
        lrem d 2 a
        lrange d 0 -1
        lrem d -1 a
        lrange d 0 -1
        lrem d 0 a
        lrange d 0 -1
        lrem nokey 0 a
        rpush p a b c a b c a
        lpos p a
        lpos p a rank 2
        lpos p a rank -1
        lpos p a count 0
        lpos p a count 2 rank -1
        lpos p a maxlen 3 count 0
        lpos p zz
        lpos p zz count 0
        lpos p a rank 0
        lpos p a count -1
        lpos p a maxlen -1
        lpos p a bogus 1
        lpos p a rank -9223372036854775808
        lpos p a rank abc
        lpos p a count
        lpos nokey a
        ltrim p 1 -2
        lrange p 0 -1
        ltrim p 5 1
        exists p
        lpop l
        rpop l
        lpop l 2
        rpop l 2
        lpop l 0
        lpop nokey
        lpop nokey 2
        lpop l -1
        lpop l abc
        rpop nokey 0
        rpush m1 1 2 3
        lmove m1 m2 left right
        lmove m1 m2 right left
        lrange m2 0 -1
        lmove m1 m1 left right
        lrange m1 0 -1
        lmove nokey m2 left left
        lmove m1 m2 up down
        rpoplpush m1 m2
        rpoplpush m1 m2
        exists m1
        lrange m2 0 -1
        lmpop 2 nokey m2 left
        lmpop 2 nokey m2 right count 10
        lmpop 1 m2 left
        lmpop 0 m2 left
        lmpop 5 m2 left
        lmpop 1 m2 middle
        lmpop 1 m2 left count 0
        set s x
        lpush s a
        lrange s 0 -1
        lmove l s left left
        lmpop 2 nokey s left
        object encoding l
        type l
        rpush
        lpush k
        "#,
    );
}

#[test]
fn set_commands_match_redis() {
    diff_script(
        "set",
        r#"
        sadd s1 1 2 3 4 5
        sadd s1 3 6
        sadd s2 4 5 6 7 a
        sadd s3 x y z
        scard s1
        scard nokey
        sismember s1 3
        sismember s1 9
        sismember nokey 1
        smismember s1 1 9 3
        smismember nokey a
        ~smembers s1
        ~smembers s2
        smembers nokey
        srem s1 1 9
        srem nokey 1
        ~sinter s1 s2
        ~sinter s1 nokey
        ~sunion s1 s2 s3
        ~sdiff s1 s2
        ~sdiff nokey s1
        sinterstore dst s1 s2
        ~smembers dst
        sunionstore dst s1 s3
        scard dst
        sdiffstore dst s1 s2
        ~smembers dst
        sinterstore dst s1 nokey
        exists dst
        sintercard 2 s1 s2
        sintercard 2 s1 s2 limit 1
        sintercard 2 s1 s2 limit 0
        sintercard 0 s1
        sintercard 3 s1 s2
        sintercard 2 s1 s2 limit -1
        sintercard 2 s1 s2 foo
        sintercard 2 s1 s2 limit abc
        spop s1 abc
        srandmember s1 abc
        smove s1 s3 2
        smove s1 s3 nope
        smove nokey s3 a
        smove s1 s1 3
        sismember s3 2
        srandmember nokey
        srandmember nokey 5
        srandmember s3 0
        spop nokey
        spop nokey 3
        spop s3 -1
        spop s3 0
        sadd one x
        spop one
        exists one
        sadd two a b
        ~spop two 5
        exists two
        sscan s1 abc
        set str x
        sadd str a
        sinter s1 str
        sunionstore dst s1 str
        smove s1 str 3
        object encoding s1
        type s1
        "#,
    );
}

#[test]
fn zset_commands_match_redis() {
    diff_script(
        "zset",
        r#"
        zadd z 1 a 2 b 3 c 4 d 5 e
        zadd z 1.5 ab -1 neg +inf top -inf bottom
        zadd z nan x
        zadd z 1 a 2
        zadd z abc a
        zadd z nx xx 1 a
        zadd z gt lt 1 a
        zadd z nx gt 1 a
        zadd z incr 1 a 2 b
        zadd z xx 10 a 10 new
        zadd z nx 20 a 20 new2
        zadd z ch 30 a 30 new3 30 new3
        zadd z gt ch 1 a 40 b
        zadd z lt ch 1 c 50 d
        zadd z incr 5 a
        zadd z incr nx 5 a
        zadd z xx incr 5 nope
        zadd z incr gt -1 a
        zadd nokey xx 1 a
        exists nokey
        zincrby z 1.1 b
        zincrby z abc b
        zincrby z 1 fresh
        zscore z b
        zscore z nope
        zscore nokey a
        zmscore z a b nope
        zmscore nokey a
        zcard z
        zcard nokey
        zrank z c
        zrevrank z c
        zrank z nope
        zcount z -inf +inf
        zcount z (1 3
        zcount z 2 (2
        zcount z x 1
        zrange z 0 -1
        zrange z 0 -1 withscores
        zrange z 2 4 rev withscores
        zrange z -3 -1
        zrange z 5 2
        zrange z (1 5 byscore
        zrange z 5 (1 byscore rev withscores
        zrange z -inf +inf byscore limit 2 3
        zrange z +inf -inf byscore rev limit 1 2 withscores
        zrange z -inf +inf byscore limit -1 2
        zrange z -inf +inf byscore limit 1 -1
        zrange z 0 -1 limit 1 2
        zrange z - + bylex withscores
        zrange z a b bylex
        zrange z 0 -1 bogus
        zrange nokey 0 -1
        zrevrange z 0 2 withscores
        zrangebyscore z 2 4 withscores
        zrangebyscore z (2 (4
        zrangebyscore z 2 4 limit 1 1
        zrangebyscore z 2 4 rev
        zrevrangebyscore z 4 2 withscores
        zrangebyscore z a b
        zadd l 0 a 0 b 0 c 0 d 0 e 0 f
        zrangebylex l - +
        zrangebylex l [b (e
        zrangebylex l (b [e limit 1 2
        zrevrangebylex l + -
        zrevrangebylex l [e (b
        zrangebylex l b e
        zrangebylex l + -
        zlexcount l - +
        zlexcount l [b [d
        zlexcount l a b
        zrangestore dst z 0 2
        zrange dst 0 -1 withscores
        zrangestore dst z 5 1 byscore rev limit 0 2
        zrange dst 0 -1 withscores
        zrangestore dst nokey 0 -1
        exists dst
        zrangestore dst z 0 -1 withscores
        zremrangebyrank l 0 1
        zrange l 0 -1
        zremrangebylex l [d +
        zrange l 0 -1
        zremrangebyscore z (1 3
        zrange z 0 -1 withscores
        zremrangebyrank nokey 0 -1
        zremrangebyscore z x y
        zrem z a nope
        zrem nokey a
        zadd p 1 a 2 b 3 c 4 d
        zpopmin p
        zpopmax p
        zpopmin p 0
        zpopmin p 5
        exists p
        zpopmin nokey
        zpopmin nokey 2
        zpopmax p -1
        zadd p 1 a 2 b 3 c 4 d
        zmpop 1 p min
        zmpop 2 nokey p max count 2
        zmpop 1 nokey min
        zmpop 1 p mid
        zmpop 1 p min count 0
        zmpop 0 p min
        zadd u1 1 a 2 b 3 c
        zadd u2 10 b 20 c 30 d
        sadd st c d e
        zunion 2 u1 u2 withscores
        zunion 2 u1 u2 weights 2 3 withscores
        zunion 2 u1 u2 aggregate min withscores
        zunion 2 u1 u2 aggregate max withscores
        zunion 3 u1 u2 st withscores
        zinter 2 u1 u2 withscores
        zinter 3 u1 u2 st withscores
        zinter 2 u1 nokey
        zdiff 2 u1 u2 withscores
        zdiff 2 u1 u2 weights 1 2
        zunion 0 u1
        zunion 3 u1 u2
        zunion 2 u1 u2 weights 1
        zunion 2 u1 u2 weights 1 x
        zunion 2 u1 u2 aggregate avg
        zunionstore out 2 u1 u2 weights 1 -1
        zrange out 0 -1 withscores
        zinterstore out 2 u1 u2 aggregate max
        zrange out 0 -1 withscores
        zdiffstore out 2 u1 u2
        zrange out 0 -1 withscores
        zinterstore out 2 u1 nokey
        exists out
        zunionstore out 2 u1 u2 withscores
        zintercard 2 u1 u2
        zintercard 2 u1 u2 limit 1
        zintercard 2 u1 u2 limit -1
        zintercard 0 u1
        zintercard 2 u1 u2 limit abc
        zintercard 5 u1 u2
        zmpop 5 u1 min
        zpopmin u1 abc
        zrandmember u1 abc
        zrange u1 0 -1 limit 1
        zadd u1 -0 negzero
        zscore u1 negzero
        zincrby u1 inf negzero
        zincrby u1 -inf negzero
        zadd inf 1 a
        zadd inf2 inf a
        zunion 2 inf inf2 weights 0 1 withscores
        zadd ninf -inf a
        zunion 2 inf2 ninf withscores
        zrandmember nokey
        zrandmember nokey 3
        zrandmember u1 0
        zrandmember u1 1 withscores extra
        zscan u1 0
        zscan u1 0 match a*
        zadd f 1.1 a 0.1 b 1e100 c -0.5 d 123456789.125 e
        zrange f 0 -1 withscores
        zscan f 0
        set str x
        zadd str 1 a
        zrange str 0 -1
        zunion 2 u1 str
        object encoding u1
        type u1
        zadd
        zrange z 0
        "#,
    );
}

#[test]
fn hyperloglog_commands_match_redis() {
    diff_script(
        "hll",
        r#"
        pfadd h a b c d e f g
        pfadd h a
        pfadd h
        pfadd fresh
        get fresh
        pfcount h
        get h
        pfcount nokey
        pfadd h2 x y z a
        pfcount h h2
        pfcount h nokey
        pfmerge m h h2
        pfcount m
        get m
        pfmerge m
        pfmerge m2 nokey
        get m2
        set str hello
        pfadd str a
        pfcount str
        pfmerge m str
        rpush lst a
        pfadd lst a
        pfcount lst
        pfcount h lst
        pfadd d a b c
        pfdebug encoding d
        pfdebug decode d
        pfdebug todense d
        pfdebug encoding d
        pfdebug todense d
        pfdebug decode d
        get d
        pfdebug foo d
        pfdebug encoding nokey
        pfdebug encoding lst
        pfadd d2 x y
        pfdebug getreg d2
        pfdebug encoding d2
        pfselftest
        "#,
    );
}

#[test]
fn encoding_thresholds_follow_config_like_redis() {
    diff_script(
        "encodings",
        r#"
        config set hash-max-listpack-entries 2
        hset hh a 1 b 2
        object encoding hh
        hset hh c 3
        object encoding hh
        config set hash-max-listpack-value 4
        hset hv a 1234
        object encoding hv
        hset hv b 12345
        object encoding hv
        config set set-max-intset-entries 3
        sadd si 1 2 3
        object encoding si
        sadd si 4
        object encoding si
        ~smembers si
        config set zset-max-listpack-entries 1
        zadd zz 1 a
        object encoding zz
        zadd zz 2 b
        object encoding zz
        zrange zz 0 -1 withscores
        config set zset-max-listpack-entries 128
        config set zset-max-listpack-value 3
        zadd zv 1 abc
        object encoding zv
        zadd zv 1 abcd
        object encoding zv
        config set list-max-listpack-size 2
        rpush ll a b c d e
        lrange ll 0 -1
        lindex ll 3
        linsert ll before c x
        lrange ll 0 -1
        object encoding ll
        config set list-max-listpack-size -2
        config set hash-max-listpack-entries 128
        config set hash-max-listpack-value 64
        config set set-max-intset-entries 512
        config set zset-max-listpack-entries 128
        config set zset-max-listpack-value 64
        "#,
    );
}
