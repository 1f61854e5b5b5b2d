//! nodes.conf: our format against files redis-server writes, round trips, corrupt files.

mod common;

use std::time::Duration;

use common::*;
use tessera_cluster::nodes_conf::{self, NodesConfError};
use tessera_cluster::ClusterConfig;

/// Masks the fields that are times or live link state.
fn masked(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut f: Vec<&str> = l.split(' ').collect();
            if f[0] != "vars" && f.len() >= 8 {
                f[4] = "T";
                f[5] = "T";
                f[7] = "L";
            }
            f.join(" ")
        })
        .collect();
    v.sort();
    v
}

const SAMPLE: &str = "\
aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 127.0.0.1:7000@17000,host-a myself,master - 0 0 3 connected 0-99 200 [50->-cccccccccccccccccccccccccccccccccccccccc] [300-<-cccccccccccccccccccccccccccccccccccccccc]
bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb 127.0.0.1:7001@17001 slave aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 0 1700000000000 3 connected
cccccccccccccccccccccccccccccccccccccccc 10.0.0.3:7002@17002 master,fail - 1700000000000 1700000000000 7 disconnected 301-16383
dddddddddddddddddddddddddddddddddddddddd :0@0 master,noaddr - 0 0 0 disconnected
vars currentEpoch 9 lastVoteEpoch 4
";

fn cfg(port: u16) -> ClusterConfig {
    ClusterConfig {
        port,
        enabled: true,
        ..Default::default()
    }
}

#[test]
fn round_trip_keeps_every_line() {
    let st = nodes_conf::parse(SAMPLE, "sample", cfg(7000), 1_800_000_000_000, 1).expect("parses");
    assert_eq!(
        st.name_of_myself(),
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    );
    assert_eq!((st.current_epoch, st.last_vote_epoch), (9, 4));
    let out = nodes_conf::render(&st);
    // Our own hostname comes from the config, not the file.
    assert_eq!(masked(&out), masked(&SAMPLE.replace(",host-a", "")));
    let again = nodes_conf::parse(&out, "again", cfg(7000), 1_800_000_000_000, 2).expect("parses");
    assert_eq!(nodes_conf::render(&again), out);
}

#[test]
fn corrupt_file_names_the_line() {
    let bad = SAMPLE.replace("10.0.0.3:7002@17002", "10.0.0.3:70x2@17002");
    match nodes_conf::parse(&bad, "nodes.conf", cfg(7000), 0, 1) {
        Err(e @ NodesConfError::Corrupt { line: 3, .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with("nodes.conf:3: bad port"), "{msg}");
        }
        other => panic!("expected a corrupt-line error, got {:?}", other.err()),
    }
    let bad = SAMPLE.replace("master,fail", "master,flying");
    assert!(matches!(
        nodes_conf::parse(&bad, "f", cfg(7000), 0, 1),
        Err(NodesConfError::Corrupt { line: 3, .. })
    ));
    let bad = SAMPLE.replace("0-99 200", "0-99 99999");
    assert!(matches!(
        nodes_conf::parse(&bad, "f", cfg(7000), 0, 1),
        Err(NodesConfError::Corrupt { line: 1, .. })
    ));
    let bad = SAMPLE.replace("myself,master", "master");
    assert!(matches!(
        nodes_conf::parse(&bad, "f", cfg(7000), 0, 1),
        Err(NodesConfError::Invalid { .. })
    ));
    let bad = "short line\n";
    assert!(matches!(
        nodes_conf::parse(bad, "f", cfg(7000), 0, 1),
        Err(NodesConfError::Corrupt { line: 1, .. })
    ));
}

#[test]
fn loads_a_file_written_by_redis_server() {
    let r1 = ServerProc::start(redis_bin(), 2000);
    let r2 = ServerProc::start(redis_bin(), 2000);
    let r3 = ServerProc::start(redis_bin(), 2000);
    for s in [&r2, &r3] {
        r1.cmd(&["CLUSTER", "MEET", "127.0.0.1", &s.port.to_string()])
            .expect("meet");
    }
    let ids = vec![r1.myid(), r2.myid(), r3.myid()];
    wait_for(Duration::from_secs(30), "redis nodes to meet", || {
        [&r1, &r2, &r3]
            .iter()
            .all(|s| sees_all_connected(&s.nodes(), &ids))
    });
    r1.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "100", "200", "200"])
        .expect("addslots");
    r3.cmd(&["CLUSTER", "ADDSLOTSRANGE", "300", "400"])
        .expect("addslots");
    r2.cmd(&["CLUSTER", "REPLICATE", &ids[0]])
        .expect("replicate");
    r1.cmd(&["CLUSTER", "SETSLOT", "50", "MIGRATING", &ids[2]])
        .expect("migrating");
    r1.cmd(&["CLUSTER", "SETSLOT", "350", "IMPORTING", &ids[2]])
        .expect("importing");
    wait_for(
        Duration::from_secs(30),
        "r1 to see r2 as its replica",
        || {
            parse_nodes(&r1.nodes())
                .get(&ids[1])
                .is_some_and(|n| n.master == ids[0])
        },
    );
    r1.cmd(&["CLUSTER", "SAVECONFIG"]).expect("saveconfig");
    let path = r1.dir.path().join("nodes.conf");
    let text = std::fs::read_to_string(&path).expect("read redis nodes.conf");
    let st = nodes_conf::load(&path, cfg(r1.port), 1_800_000_000_000, 3)
        .expect("loads")
        .expect("present");
    assert_eq!(st.name_of_myself(), ids[0]);
    assert_eq!(
        masked(&nodes_conf::render(&st)),
        masked(&text),
        "redis wrote:\n{text}"
    );
}

trait MyName {
    fn name_of_myself(&self) -> String;
}
impl MyName for tessera_cluster::ClusterState {
    fn name_of_myself(&self) -> String {
        String::from_utf8_lossy(&self.myself).into_owned()
    }
}

#[test]
fn redis_server_loads_a_file_we_wrote() {
    let st = nodes_conf::parse(SAMPLE, "sample", cfg(7000), 1_800_000_000_000, 1).expect("parses");
    let ours = nodes_conf::render(&st);
    let r = ServerProc::start_with_conf(redis_bin(), 2000, &ours);
    assert_eq!(
        r.myid(),
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "redis took our myself line"
    );
    let v = parse_nodes(&r.nodes());
    assert_eq!(v.len(), 4);
    assert_eq!(
        v["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"].slots,
        vec!["0-99", "200"]
    );
    assert_eq!(
        v["cccccccccccccccccccccccccccccccccccccccc"].slots,
        vec!["301-16383"]
    );
    assert_eq!(
        v["bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"].master,
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    );
    let info = cmd_string(r.port, &["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_current_epoch:9"), "{info}");
    assert!(r
        .nodes()
        .contains("[50->-cccccccccccccccccccccccccccccccccccccccc]"));
}

/// Plain saves overwrite in place (Redis 7.0): a shorter content leaves no stale tail, and
/// fsynced saves replace the file; both read back exactly and parse.
#[test]
fn in_place_and_replacing_writes_read_back_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nodes.conf");
    let long = SAMPLE.to_string();
    let short: String = SAMPLE
        .lines()
        .filter(|l| !l.starts_with("dddd"))
        .map(|l| format!("{l}\n"))
        .collect();
    for (content, fsync) in [
        (&long, false),
        (&short, false),
        (&long, true),
        (&short, true),
        (&long, false),
        (&short, false),
    ] {
        nodes_conf::write_file(&path, content, fsync).expect("write");
        let back = std::fs::read_to_string(&path).expect("read");
        assert_eq!(&back, content, "fsync={fsync}");
        nodes_conf::parse(&back, "nodes.conf", cfg(7000), 0, 1).expect("parses");
    }
    // No temp files left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}
