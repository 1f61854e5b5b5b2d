//! WATCH against redis-server 7.0: keys that expire between WATCH and EXEC, keys already
//! expired at WATCH time, and FLUSHDB / FLUSHALL / SWAPDB touching only the watched keys
//! that exist (Redis's `touchAllWatchedKeysInDb`). Each scenario runs on both servers and
//! the EXEC replies must match. Active expiry is switched off (DEBUG SET-ACTIVE-EXPIRE 0)
//! so an expired key stays in the keyspace until something touches it.

use std::time::Duration;

use tessera_testkit::pubsub::*;
use tessera_testkit::*;

enum Step {
    /// A command on the other client.
    Other(&'static [&'static str]),
    /// Wait so that TTLs set before pass (only ever makes "expired" more true).
    Sleep(u64),
    /// Turn active expiry on and wait until the keyspace is empty.
    ActiveExpireAll,
}

use Step::*;

struct Scenario {
    name: &'static str,
    /// Run on the watching client right before WATCH k (pipelined with it).
    setup: &'static [&'static [&'static str]],
    between: &'static [Step],
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "SORT without STORE only reads the watched key",
        setup: &[&["RPUSH", "k", "3", "1", "2"]],
        between: &[
            Other(&["SORT", "k"]),
            Other(&["SORT", "k", "LIMIT", "0", "1", "ALPHA"]),
        ],
    },
    Scenario {
        name: "SORT ... STORE overwrites the watched key",
        setup: &[&["RPUSH", "src", "3", "1", "2"], &["SET", "k", "v"]],
        between: &[Other(&["SORT", "src", "STORE", "k"])],
    },
    Scenario {
        name: "key expires after WATCH, untouched",
        setup: &[&["SET", "k", "v", "PX", "1500"]],
        between: &[Sleep(2000)],
    },
    Scenario {
        name: "key expired before WATCH",
        setup: &[&["SET", "k", "v", "PX", "1"], &["DEBUG", "SLEEP", "0.05"]],
        between: &[],
    },
    Scenario {
        name: "expires after WATCH, then lazily deleted by a reader",
        setup: &[&["SET", "k", "v", "PX", "1500"]],
        between: &[Sleep(2000), Other(&["GET", "k"])],
    },
    Scenario {
        name: "expired at WATCH, then lazily deleted",
        setup: &[&["SET", "k", "v", "PX", "1"], &["DEBUG", "SLEEP", "0.05"]],
        between: &[Other(&["GET", "k"])],
    },
    Scenario {
        name: "expired at WATCH, then written again",
        setup: &[&["SET", "k", "v", "PX", "1"], &["DEBUG", "SLEEP", "0.05"]],
        between: &[Other(&["SET", "k", "w"])],
    },
    Scenario {
        name: "expired at WATCH, then FLUSHDB",
        setup: &[&["SET", "k", "v", "PX", "1"], &["DEBUG", "SLEEP", "0.05"]],
        between: &[Other(&["FLUSHDB"])],
    },
    Scenario {
        name: "existing key, active expiry deletes it",
        setup: &[&["SET", "k", "v", "PX", "300"]],
        between: &[ActiveExpireAll],
    },
    Scenario {
        name: "FLUSHDB, watched key missing",
        setup: &[],
        between: &[Other(&["FLUSHDB"])],
    },
    Scenario {
        name: "FLUSHDB, watched key exists",
        setup: &[&["SET", "k", "v"]],
        between: &[Other(&["FLUSHDB"])],
    },
    Scenario {
        name: "FLUSHDB of another db holding the key",
        setup: &[&["SELECT", "1"], &["SET", "k", "v"], &["SELECT", "0"]],
        between: &[Other(&["SELECT", "1"]), Other(&["FLUSHDB"])],
    },
    Scenario {
        name: "FLUSHALL, watched key missing",
        setup: &[],
        between: &[Other(&["FLUSHALL"])],
    },
    Scenario {
        name: "FLUSHALL, watched key exists",
        setup: &[&["SET", "k", "v"]],
        between: &[Other(&["FLUSHALL"])],
    },
    Scenario {
        name: "SWAPDB brings the key in",
        setup: &[&["SELECT", "1"], &["SET", "k", "v"], &["SELECT", "0"]],
        between: &[Other(&["SWAPDB", "0", "1"])],
    },
    Scenario {
        name: "SWAPDB, key in neither db",
        setup: &[],
        between: &[Other(&["SWAPDB", "0", "1"])],
    },
    Scenario {
        name: "SWAPDB takes the key away",
        setup: &[&["SET", "k", "v"]],
        between: &[Other(&["SWAPDB", "0", "1"])],
    },
    Scenario {
        name: "SWAPDB brings an already expired key",
        setup: &[
            &["SELECT", "1"],
            &["SET", "k", "v", "PX", "1"],
            &["SELECT", "0"],
            &["DEBUG", "SLEEP", "0.05"],
        ],
        between: &[Other(&["SWAPDB", "0", "1"])],
    },
    Scenario {
        name: "plain write",
        setup: &[&["SET", "k", "v"]],
        between: &[Other(&["SET", "k", "w"])],
    },
];

fn run(c: &mut Raw, args: &[&str]) -> String {
    c.cmd(args).s()
}

fn exec_results(bin: &'static str) -> Vec<String> {
    let p = Proc::start(bin, &["--enable-debug-command", "yes"]);
    let mut out = Vec::new();
    for s in SCENARIOS {
        let mut a = p.raw();
        let mut b = p.raw();
        assert_eq!(run(&mut b, &["FLUSHALL"]), "OK");
        assert_eq!(run(&mut b, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "OK");
        // Setup and WATCH go out in one write: no gap for a TTL to pass in between.
        let mut batch = Vec::new();
        for c in s.setup {
            let v: Vec<&[u8]> = c.iter().map(|x| x.as_bytes()).collect();
            batch.extend(encode(&v));
        }
        batch.extend(encode(&[b"WATCH", b"k"]));
        a.send(&batch);
        for _ in 0..=s.setup.len() {
            a.read();
        }
        for st in s.between {
            match st {
                Other(c) => {
                    run(&mut b, c);
                }
                Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
                ActiveExpireAll => {
                    run(&mut b, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
                    wait_for(Duration::from_secs(20), "active expiry", || {
                        run(&mut b, &["DBSIZE"]) == "0"
                    });
                }
            }
        }
        assert_eq!(run(&mut a, &["MULTI"]), "OK");
        assert_eq!(run(&mut a, &["PING"]), "QUEUED");
        out.push(format!("{}: {}", s.name, run(&mut a, &["EXEC"])));
    }
    out
}

#[test]
fn watch_matches_redis() {
    let ours = exec_results(tessera_bin());
    let theirs = exec_results(redis_bin());
    assert_eq!(ours, theirs);
    // The comparison must cover both outcomes.
    assert!(theirs.iter().any(|r| r.ends_with("(nil)")), "{theirs:?}");
    assert!(theirs.iter().any(|r| r.ends_with("[PONG]")), "{theirs:?}");
}
