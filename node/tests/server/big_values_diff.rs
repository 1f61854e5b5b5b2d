//! Big string values against redis-server 7.0. A request ending in an argument of 32 KiB
//! or more is read into a buffer of its own, and SET and its family keep that buffer as the
//! stored value instead of copying it (`Ctx::string_value`). Every way such a request can
//! arrive and every later use of the value must answer as Redis does, byte for byte.
//! Such a value is also written to a plain-socket client from its own buffer rather than
//! copied into the reply buffer (`Out::bulk_shared`): every way those replies can be
//! queued, dropped, read back or left waiting on a full socket must answer as Redis does.

use std::io::Write;
use std::time::Duration;

use tessera_testkit::*;

/// Deterministic bytes that are not all alike (a wrong offset shows).
fn value(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Sends `bytes` in pieces of `step` with a short pause between them, so the server sees
/// the request across many reads.
fn trickle(c: &mut Conn, bytes: &[u8], step: usize) {
    for piece in bytes.chunks(step) {
        c.w.write_all(piece).expect("write");
        c.w.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs the script on one server and returns every reply's exact bytes.
fn script(port: u16) -> Vec<Vec<u8>> {
    let mut c = Conn::connect(port);
    let mut got = Vec::new();
    let big = value(100 * 1024, 1);
    let bigger = value(300 * 1024 + 7, 2);
    let other = value(64 * 1024, 3);
    macro_rules! run {
        ($($a:expr),+) => {{
            let args: Vec<&[u8]> = vec![$(AsRef::<[u8]>::as_ref(&$a)),+];
            c.raw_write(&encode(&args));
            got.push(c.read_raw());
        }};
    }
    // One write; then the stored value, its length, a range of it.
    run!(b"SET", b"k1", big);
    run!(b"GET", b"k1");
    run!(b"STRLEN", b"k1");
    run!(b"GETRANGE", b"k1", b"50000", b"50100");
    run!(b"OBJECT", b"ENCODING", b"k1");
    // Many small reads, and the next requests in the same write as the value's tail.
    let mut req = encode(&[b"SET", b"k2", &bigger]);
    let tail = req.split_off(req.len() - 5);
    trickle(&mut c, &req, 1500);
    let mut rest = tail;
    rest.extend_from_slice(&encode(&[b"GET", b"k2"]));
    rest.extend_from_slice(&encode(&[b"SET", b"k3", b"small"]));
    rest.extend_from_slice(&encode(&[b"GET", b"k3"]));
    c.raw_write(&rest);
    for _ in 0..4 {
        got.push(c.read_raw());
    }
    // A pipeline of big SETs in one write, each followed by its GET.
    let mut pipe = Vec::new();
    for i in 0..5u64 {
        let v = value(40 * 1024 + i as usize, 10 + i);
        pipe.extend_from_slice(&encode(&[b"SET", format!("p{i}").as_bytes(), &v]));
        pipe.extend_from_slice(&encode(&[b"GET", format!("p{i}").as_bytes()]));
    }
    got.extend(
        c.pipeline(pipe, 10)
            .into_iter()
            .map(|r| format!("{r:?}").into_bytes()),
    );
    // The big argument followed by options, and the family of SET.
    run!(b"SET", b"k4", big, b"EX", b"1000");
    run!(b"GET", b"k4");
    run!(b"SET", b"k4", other, b"GET");
    run!(b"SETEX", b"k5", b"1000", other);
    run!(b"PSETEX", b"k6", b"1000000", big);
    run!(b"SETNX", b"k7", big);
    run!(b"SETNX", b"k7", other);
    run!(b"GETSET", b"k7", other);
    run!(b"MSET", b"m1", big, b"m2", other);
    run!(b"MGET", b"m1", b"m2", b"k5", b"k6", b"k7");
    run!(b"APPEND", b"new", bigger);
    // Changing a stored big value in place, then overwriting and deleting it.
    run!(b"APPEND", b"k1", b"tail");
    run!(b"SETRANGE", b"k2", b"100", b"middle");
    run!(b"GET", b"k1");
    run!(b"GET", b"k2");
    run!(b"SET", b"k1", other);
    run!(b"GET", b"k1");
    run!(b"DEL", b"k1", b"k2");
    run!(b"GET", b"k1");
    // Inside a transaction, and copied to another key.
    run!(b"MULTI");
    run!(b"SET", b"t1", bigger);
    run!(b"GET", b"t1");
    run!(b"EXEC");
    run!(b"COPY", b"t1", b"t2");
    run!(b"DEL", b"t1");
    run!(b"GET", b"t2");
    // The dump of a kept value, and the value after a reload from disk.
    run!(b"SET", b"d1", big);
    run!(b"DUMP", b"d1");
    run!(b"DEBUG", b"RELOAD");
    run!(b"GET", b"d1");
    run!(b"GET", b"new");
    run!(b"DBSIZE");
    got
}

/// Replies of big stored values in every position: pipelined with small replies, dropped
/// by CLIENT REPLY, read back by scripts, inside MULTI, and left queued on a client that
/// does not read while the values are overwritten and deleted.
fn shared_replies(port: u16) -> Vec<Vec<u8>> {
    let mut c = Conn::connect(port);
    let mut got = Vec::new();
    let big = value(100 * 1024, 21);
    let bigger = value(300 * 1024 + 3, 22);
    // Writes the requests in one write and reads `n` replies.
    macro_rules! batch {
        ($n:expr, $([$($a:expr),+]),+ $(,)?) => {{
            let mut req = Vec::new();
            $(
                let args: Vec<&[u8]> = vec![$(AsRef::<[u8]>::as_ref(&$a)),+];
                req.extend_from_slice(&encode(&args));
            )+
            c.raw_write(&req);
            for _ in 0..$n {
                got.push(c.read_raw());
            }
        }};
    }
    batch!(2, [b"SET", b"b1", big], [b"SET", b"b2", bigger]);
    // Big and small replies back to back, the same value twice in one reply.
    batch!(
        7,
        [b"GET", b"b1"],
        [b"PING"],
        [b"GET", b"b2"],
        [b"MGET", b"b1", b"b2", b"nokey", b"b1"],
        [b"GETRANGE", b"b2", b"0", b"10"],
        [b"GET", b"b1"],
        [b"STRLEN", b"b2"],
    );
    // CLIENT REPLY SKIP and OFF drop big replies (and only them).
    batch!(
        2,
        [b"CLIENT", b"REPLY", b"SKIP"],
        [b"GET", b"b1"],
        [b"PING", b"after-skip"],
        [b"CLIENT", b"REPLY", b"OFF"],
        [b"GET", b"b1"],
        [b"GET", b"b2"],
        [b"MGET", b"b2", b"b1"],
        [b"CLIENT", b"REPLY", b"ON"],
    );
    batch!(1, [b"GET", b"b1"]);
    // Scripts read the value back through redis.call.
    batch!(
        4,
        [b"EVAL", b"return redis.call('GET', KEYS[1])", b"1", b"b1"],
        [b"EVAL", b"return #redis.call('GET', KEYS[1])", b"1", b"b2"],
        [b"GET", b"b2"],
        [b"EVAL", b"local v = redis.call('GET', KEYS[1]); return redis.call('STRLEN', KEYS[1]) .. ':' .. #v", b"1", b"b1"],
    );
    // In a transaction, with the key deleted after its value was queued.
    batch!(
        5,
        [b"MULTI"],
        [b"GET", b"b2"],
        [b"GETDEL", b"b2"],
        [b"GET", b"b2"],
        [b"EXEC"],
    );
    batch!(2, [b"GETDEL", b"b1"], [b"GET", b"b1"]);
    // RESP3 answers the same bulk strings (HELLO's own replies hold the client id).
    batch!(
        4,
        [b"HELLO", b"3"],
        [b"SET", b"b3", big],
        [b"GET", b"b3"],
        [b"HELLO", b"2"],
    );
    let n = got.len();
    for at in [n - 4, n - 1] {
        assert!(got[at].starts_with(b"%7\r\n") || got[at].starts_with(b"*14\r\n"));
        got[at] = b"hello".to_vec();
    }
    // A client that does not read: ~12 MB of replies wait on a full socket while the
    // values they came from are overwritten and deleted, then are read whole.
    batch!(1, [b"SET", b"w", bigger]);
    let mut req = Vec::new();
    for i in 0..40 {
        req.extend_from_slice(&encode(&[b"GET", b"w"]));
        if i == 20 {
            req.extend_from_slice(&encode(&[b"SET", b"w", &big]));
        }
    }
    req.extend_from_slice(&encode(&[b"DEL", b"w"]));
    req.extend_from_slice(&encode(&[b"GET", b"w"]));
    c.raw_write(&req);
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..43 {
        got.push(c.read_raw());
    }
    got
}

/// Compares two servers' replies one by one.
fn same_replies(want: &[Vec<u8>], have: &[Vec<u8>]) {
    assert_eq!(want.len(), have.len());
    for (i, (w, h)) in want.iter().zip(have).enumerate() {
        assert!(
            w == h,
            "reply {i} differs: redis {:?}... ({} bytes), tessera {:?}... ({} bytes)",
            String::from_utf8_lossy(&w[..w.len().min(80)]),
            w.len(),
            String::from_utf8_lossy(&h[..h.len().min(80)]),
            h.len()
        );
    }
}

#[test]
fn big_replies_answer_as_redis_does() {
    let r = Launch::redis().args(&["--save", ""]).start();
    let t = Launch::tessera().args(&["--save", ""]).start();
    same_replies(&shared_replies(r.port), &shared_replies(t.port));
}

#[test]
fn big_values_answer_as_redis_does() {
    let r = Launch::redis().args(&["--save", ""]).start();
    let t = Launch::tessera().args(&["--save", ""]).start();
    same_replies(&script(r.port), &script(t.port));
}
