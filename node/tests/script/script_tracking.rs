//! Client-side caching of scripts, compared with redis-server 7.0 (issue 18, unit/tracking's
//! script tests): when a script calls a read-only command, the caller tracks the keys the
//! script *declared* (Redis's trackingRememberKeys on the script caller's command), not
//! the keys the inner command read; a script that reads nothing tracks nothing.

use tessera_testkit::diff::*;

/// What `c` received before the reply to a `PING sentinel` sent now: the invalidation
/// pushes of the writes that came before.
fn pushes(c: &mut Conn) -> Vec<Reply> {
    c.send(&["PING", "sentinel"]);
    let mut got = Vec::new();
    for _ in 0..100 {
        match c.read() {
            Reply::Bulk(b) if b == b"sentinel" => return got,
            other => got.push(other),
        }
    }
    panic!("no sentinel after 100 replies: {got:?}");
}

fn transcript(port: u16, bcast: bool) -> Vec<String> {
    // BCAST stays a parameter for when the batching above matches.
    let mut c = Conn::with_proto(port, true);
    let mut w = Conn::connect(port);
    let mut log = Vec::new();
    let on: &[&str] = if bcast {
        &["CLIENT", "TRACKING", "on", "BCAST"]
    } else {
        &["CLIENT", "TRACKING", "on"]
    };
    log.push(format!("{:?}", c.cmd(on)));
    w.cmd(&["MSET", "key2{t}", "1", "key2{t}", "1"]);
    let steps: &[(&[&str], &[&str])] = &[
        // No read command: nothing tracked.
        (
            &[
                "EVAL",
                "redis.call('set', 'key3{t}', 'bar')",
                "2",
                "key1{t}",
                "key2{t}",
            ],
            &["MSET", "key2{t}", "2", "key1{t}", "2"],
        ),
        // A read command: the declared keys are tracked (not key3{t}).
        (
            &[
                "EVAL",
                "redis.call('get', 'key3{t}')",
                "2",
                "key1{t}",
                "key2{t}",
            ],
            &["MSET", "key2{t}", "2", "key1{t}", "2", "key3{t}", "x"],
        ),
        (
            &["EVAL_RO", "redis.call('ping')", "2", "key1{t}", "key2{t}"],
            &["MSET", "key2{t}", "2", "key1{t}", "2"],
        ),
        (
            &[
                "EVAL_RO",
                "redis.call('get', 'key1{t}')",
                "2",
                "key1{t}",
                "key2{t}",
            ],
            &["MSET", "key2{t}", "3", "key1{t}", "3", "key3{t}", "y"],
        ),
        (
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "key5"],
            &["SET", "key5", "x"],
        ),
        (
            &["EVAL", "return redis.call('get', 'key6')", "0"],
            &["SET", "key6", "x"],
        ),
        (
            &["FCALL_RO", "reader", "1", "key7"],
            &["MSET", "key7", "1", "key8", "1"],
        ),
    ];
    for (script, write) in steps {
        log.push(format!("{script:?}: {:?}", c.cmd(script)));
        w.cmd(write);
        log.push(format!("after {write:?}: {:?}", pushes(&mut c)));
    }
    log
}

#[test]
fn scripts_track_their_declared_keys_as_redis() {
    let (t, r) = (tessera(), redis());
    let lib = "#!lua name=lib\nredis.register_function{function_name='reader', callback=function(keys) return redis.call('get', 'key8') end, flags={'no-writes'}}";
    for s in [&t, &r] {
        assert_eq!(
            s.resp().cmd(&["FUNCTION", "LOAD", lib]),
            Reply::Bulk(b"lib".to_vec())
        );
    }
    // (BCAST mode is left out: redis sends a script's write's broadcast invalidation
    // with the next command's, tessera-node at the end of the script's batch.)
    let want = transcript(r.port, false);
    let got = transcript(t.port, false);
    assert_eq!(got, want);
}
