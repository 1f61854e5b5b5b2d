//! CLUSTER subcommand replies compared byte for byte with a fresh redis-server 7.0 node.

mod common;

use common::*;

fn norm(bytes: &[u8], id: &str, port: u16) -> String {
    String::from_utf8_lossy(bytes)
        .replace(id, "<ID>")
        .replace(&(port as u32 + 10000).to_string(), "<BUSPORT>")
        .replace(&port.to_string(), "<PORT>")
}

#[test]
fn cluster_replies_match_redis_byte_for_byte() {
    let ours = TestNode::start(15000);
    let redis = ServerProc::start(redis_bin(), 15000);
    let (our_id, redis_id) = (ours.myid(), redis.myid());
    let script: Vec<Vec<&str>> = vec![
        vec!["KEYSLOT", "foo"],
        vec!["KEYSLOT", "{user1000}.following"],
        vec!["KEYSLOT"],
        vec!["COUNTKEYSINSLOT", "16384"],
        vec!["COUNTKEYSINSLOT", "abc"],
        vec!["COUNTKEYSINSLOT", "7"],
        vec!["GETKEYSINSLOT", "7", "-1"],
        vec!["GETKEYSINSLOT", "7", "10"],
        vec!["ADDSLOTS", "16384"],
        vec!["ADDSLOTS", "x"],
        vec!["ADDSLOTS", "1", "1"],
        vec!["ADDSLOTS", "1", "2", "3", "10", "11", "12"],
        vec!["ADDSLOTS", "3"],
        vec!["DELSLOTS", "500"],
        vec!["DELSLOTS", "12"],
        vec!["ADDSLOTSRANGE", "10", "5"],
        vec!["ADDSLOTSRANGE", "10"],
        vec!["ADDSLOTSRANGE", "100", "200", "300", "300"],
        vec!["DELSLOTSRANGE", "150", "160"],
        vec!["NODES"],
        vec!["SLOTS"],
        vec!["SHARDS"],
        vec!["INFO"],
        vec!["MEET", "1.2.3", "7000"],
        vec!["MEET", "127.0.0.1", "abc"],
        vec!["MEET", "127.0.0.1", "7000", "99999"],
        vec!["FORGET", "0000000000000000000000000000000000000000"],
        vec!["FORGET", "<ID>"],
        vec!["REPLICATE", "nope"],
        vec!["REPLICATE", "<ID>"],
        vec!["COUNT-FAILURE-REPORTS", "nope"],
        vec!["COUNT-FAILURE-REPORTS", "<ID>"],
        vec!["SETSLOT", "1", "BLAH"],
        vec!["SETSLOT", "16384", "STABLE"],
        vec!["SETSLOT", "1", "MIGRATING", "nope"],
        vec!["SETSLOT", "4000", "MIGRATING", "<ID>"],
        vec!["SETSLOT", "1", "IMPORTING", "<ID>"],
        vec!["SETSLOT", "1", "NODE", "nope"],
        vec!["SETSLOT", "1", "STABLE"],
        vec!["SET-CONFIG-EPOCH", "-1"],
        vec!["SET-CONFIG-EPOCH", "5"],
        vec!["SET-CONFIG-EPOCH", "6"],
        vec!["BUMPEPOCH"],
        vec!["INFO"],
        vec!["RESET", "SOFTLY"],
        vec!["FLUSHSLOTS"],
        vec!["NODES"],
        vec!["SAVECONFIG"],
        vec!["NOSUCHTHING"],
        vec!["FAILOVER"],
        vec!["FAILOVER", "FORCE"],
        vec!["FAILOVER", "SOON"],
        vec!["FAILOVER", "FORCE", "NOW"],
        vec!["MEET", "1.2.3.4"],
        vec!["MEET", "1", "2", "3", "4"],
        vec!["RESET", "a", "b"],
        vec!["SETSLOT", "1"],
        vec!["SETSLOT", "1", "NODE"],
        vec!["ADDSLOTSRANGE", "1", "2", "3"],
        vec!["INFO", "x"],
        vec!["GETKEYSINSLOT", "1"],
        vec!["RESET", "HARD"],
        vec!["INFO"],
    ];
    for cmd in script {
        let with =
            |id: &str| -> Vec<String> { cmd.iter().map(|a| a.replace("<ID>", id)).collect() };
        let r_args = with(&redis_id);
        let o_args = with(&our_id);
        let mut r_full = vec!["CLUSTER"];
        r_full.extend(r_args.iter().map(String::as_str));
        let redis_bytes = raw_reply(redis.port, &r_full);
        let o: Vec<&str> = o_args.iter().map(String::as_str).collect();
        let mut ours_bytes = Vec::new();
        ours.cluster(&o).to_resp2(&mut ours_bytes);
        let (mut r, mut u) = (
            norm(&redis_bytes, &redis_id, redis.port),
            norm(&ours_bytes, &our_id, ours.port),
        );
        if cmd[0] == "INFO" {
            // Message counters depend on traffic; compare everything else.
            let strip = |s: &str| {
                s.lines()
                    .filter(|l| !l.contains("stats_messages"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            r = strip(&r);
            u = strip(&u);
        }
        if cmd[0] == "RESET" && cmd.get(1) == Some(&"HARD") {
            continue; // new random IDs on both sides
        }
        assert_eq!(u, r, "CLUSTER {}", cmd.join(" "));
    }
}
