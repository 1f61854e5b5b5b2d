//! COMMAND LIST / INFO of CLUSTER's subcommands against redis-server 7.0 (issue 18,
//! unit/introspection-2 'COMMAND LIST FILTERBY PATTERN - list all commands/subcommands'):
//! CLUSTER is a container whose subcommands are listed and checked like every other's, also
//! outside cluster mode.

use tessera_testkit::*;

/// CLUSTER subcommands tessera-node has beyond Redis 7.0's (Redis 7.2's MYSHARDID, Valkey
/// 9's atomic slot migration).
const TESSERA_ONLY: &[&str] = &[
    "cluster|myshardid",
    "cluster|migrateslots",
    "cluster|getslotmigrations",
    "cluster|cancelslotmigrations",
    "cluster|syncslots",
];

fn sorted(r: R) -> Vec<String> {
    let mut v: Vec<String> = match r {
        R::Arr(v) => v.iter().map(R::s).collect(),
        other => vec![other.s()],
    };
    v.retain(|n| !TESSERA_ONLY.contains(&n.as_str()));
    v.sort();
    v
}

#[test]
fn command_list_pattern_like_redis() {
    let [r, t] = [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start());
    let (mut rc, mut tc) = (r.raw(), t.raw());
    let mut diffs = Vec::new();
    for p in [
        "set",
        "config*",
        "config|*re*",
        "cl*help",
        "cluster|*",
        "non_exists*",
        "c*|help",
    ] {
        let args = ["COMMAND", "LIST", "FILTERBY", "PATTERN", p];
        let (want, got) = (sorted(rc.cmd(&args)), sorted(tc.cmd(&args)));
        if want != got {
            diffs.push(format!("{p}: redis {want:?}\n  tessera {got:?}"));
        }
    }
    // Arity and unknown subcommands are checked before the cluster support is (Redis's
    // processCommand, then clusterCommand).
    for args in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "INFO", "x"][..],
        &["CLUSTER", "FORGET"][..],
        &["CLUSTER", "NOSUCH"][..],
        &["CLUSTER", "KEYSLOT", "a"][..],
        &["CLUSTER", "HELP"][..],
        &["COMMAND", "INFO", "cluster|forget"][..],
        &[
            "COMMAND",
            "DOCS",
            "cluster|forget",
            "cluster|countkeysinslot",
            "cluster|setslot",
        ][..],
        &[
            "COMMAND",
            "DOCS",
            "cluster|getkeysinslot",
            "cluster|info",
            "cluster|reset",
        ][..],
        &["COMMAND", "COUNT"][..],
        &["EVAL", "return redis.call('cluster', 'reset')", "0"][..],
        &["EVAL", "return redis.pcall('cluster', 'info')", "0"][..],
    ] {
        let (want, got) = (rc.cmd(args).s(), tc.cmd(args).s());
        if want != got && args[1] != "COUNT" {
            diffs.push(format!("{args:?}: redis {want:?}\n  tessera {got:?}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
