//! INFO memory / stats / cpu list every field Redis 7.0.15 lists, in Redis's order, and
//! the ones tessera-node really tracks move as Redis's do (issue 18).

use tessera_testkit::*;

fn text(r: Reply) -> String {
    match r {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO answered {other:?}"),
    }
}

fn names(info: &str) -> Vec<String> {
    info.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

fn num(c: &mut Conn, sec: &str, field: &str) -> f64 {
    let info = text(c.cmd(&["INFO", sec]));
    info_field(&info, field)
        .and_then(|v| v.trim_end_matches('%').parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{field} missing or not a number in INFO {sec}"))
}

/// Every field redis-server lists per section is listed by tessera-node too, in the same
/// relative order (tessera's own extra fields are allowed anywhere).
#[test]
fn info_sections_list_redis_fields_in_order() {
    let r = Server::redis(&["--save", ""]);
    let t = Server::tessera(&["--save", ""]);
    let (mut rc, mut tc) = (r.resp(), t.resp());
    let mut problems = Vec::new();
    for sec in ["memory", "stats", "cpu"] {
        let want = names(&text(rc.cmd(&["INFO", sec])));
        let got = names(&text(tc.cmd(&["INFO", sec])));
        let missing: Vec<_> = want.iter().filter(|f| !got.contains(f)).collect();
        if !missing.is_empty() {
            problems.push(format!("{sec}: missing {missing:?}"));
            continue;
        }
        let ours: Vec<_> = got.iter().filter(|f| want.contains(f)).collect();
        let theirs: Vec<_> = want.iter().collect();
        if ours != theirs {
            problems.push(format!("{sec}: order {ours:?}, redis {theirs:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Fields with real values: cached scripts after SCRIPT LOAD / FLUSH, shard channels after
/// SSUBSCRIBE, reads and writes processed growing, total system memory, Lua memory.
#[test]
fn info_values_track_like_redis() {
    for s in [
        Server::redis(&["--save", ""]),
        Server::tessera(&["--save", ""]),
    ] {
        let mut c = s.resp();
        assert_eq!(num(&mut c, "memory", "number_of_cached_scripts"), 0.0);
        for i in 0..3 {
            c.cmd(&["SCRIPT", "LOAD", &format!("return {i}")]);
        }
        assert_eq!(num(&mut c, "memory", "number_of_cached_scripts"), 3.0);
        assert!(num(&mut c, "memory", "used_memory_scripts_eval") > 0.0);
        assert!(num(&mut c, "memory", "used_memory_scripts") > 0.0);
        c.cmd(&["EVAL", "return 1", "0"]);
        let lua = num(&mut c, "memory", "used_memory_lua");
        assert!(lua > 0.0 && lua < 1024.0 * 1024.0, "used_memory_lua {lua}");
        assert_eq!(num(&mut c, "memory", "used_memory_vm_eval"), lua);
        c.cmd(&["SCRIPT", "FLUSH"]);
        assert_eq!(num(&mut c, "memory", "number_of_cached_scripts"), 0.0);
        assert!(num(&mut c, "memory", "total_system_memory") > 0.0);

        let mut sub = s.resp();
        sub.cmd(&["SSUBSCRIBE", "a", "b"]);
        let mut sh = 0.0;
        for _ in 0..200 {
            sh = num(&mut c, "stats", "pubsubshard_channels");
            if sh == 2.0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(sh, 2.0, "pubsubshard_channels");

        let reads = num(&mut c, "stats", "total_reads_processed");
        let writes = num(&mut c, "stats", "total_writes_processed");
        for _ in 0..5 {
            c.cmd(&["PING"]);
        }
        assert!(num(&mut c, "stats", "total_reads_processed") >= reads + 5.0);
        assert!(num(&mut c, "stats", "total_writes_processed") >= writes + 5.0);
        assert_eq!(num(&mut c, "stats", "total_forks"), 0.0);
        assert_eq!(num(&mut c, "memory", "active_defrag_running"), 0.0);
    }
}
