//! A node restarted over a dataset that takes a while to load serves its clients during the
//! load, as redis-server 7.0 (issue 18: unit/introspection 'config during loading',
//! integration/rdb 'client freed during loading'): INFO says `loading:1`, commands flagged
//! `loading` run (CONFIG SET loglevel), the others answer -LOADING, and `dir` can't change.

use std::time::{Duration, Instant};

use tessera_testkit::*;

/// Commands sent while the restarted server loads, as one transcript.
fn during_load(port: u16) -> Vec<String> {
    // Connect and see the load, within bounds: a server that binds its port only after
    // loading is seen with loading:0 (or not at all).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut c = loop {
        if let Ok(c) = Conn::try_connect(port) {
            break c;
        }
        assert!(Instant::now() < deadline, "no connection on {port}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let info = |c: &mut Conn| match c.cmd(&["INFO", "persistence"]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => format!("{other:?}"),
    };
    let loading = info(&mut c).contains("loading:1");
    let mut out = vec![format!("loading at first INFO: {loading}")];
    for args in [
        &["GET", "key:1"][..],
        &["DBSIZE"][..],
        &["CONFIG", "SET", "loglevel", "debug"][..],
        &["CONFIG", "GET", "loglevel"][..],
        &["CONFIG", "SET", "dir", "."][..],
        &["SET", "x", "1"][..],
    ] {
        out.push(format!("{args:?} -> {:?}", c.cmd(args)));
    }
    out.push(format!(
        "still loading: {}",
        info(&mut c).contains("loading:1")
    ));
    // Let the load end at once.
    out.push(format!(
        "{:?}",
        c.cmd(&["CONFIG", "SET", "key-load-delay", "0"])
    ));
    out
}

#[test]
fn clients_served_during_the_startup_load_like_redis() {
    let mut seen = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = l.dir(dir.path()).args(&[
            "--save",
            "",
            "--enable-protected-configs",
            "yes",
            "--loading-process-events-interval-bytes",
            "1024",
        ]);
        {
            let mut s = l.clone().start();
            let mut c = s.raw();
            let fill =
                "for i = 1, 3000 do redis.call('set', 'key:' .. i, string.rep('v', 100)) end";
            c.cmd(&["EVAL", fill, "0"]);
            assert_eq!(c.cmd(&["SAVE"]).s(), "OK");
            s.stop();
        }
        // 3000 keys at 5 ms each: 15 s of loading, cut short by the transcript's end.
        let port = free_port();
        let slow = l.args(&["--key-load-delay", "5000"]);
        let _p = Process::spawn(slow.command("127.0.0.1", port, dir.path()));
        seen.push(during_load(port));
    }
    assert_eq!(seen[1], seen[0], "tessera (left), redis (right)");
}
