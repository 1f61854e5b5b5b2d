//! Error and command statistics of what scripts run, compared with redis-server 7.0 (issue
//! 18, unit/scripting "Consistent eval error reporting"): a command a script's checks refuse
//! counts as that command's rejected call and its error once; a command failing inside the
//! script counts as its failed call; the script failing with (or returning) that same error
//! counts EVAL's failed call without counting the error again. (Not covered: Redis also
//! counts EVAL failed when its reply only holds such an error nested in an array.)

use tessera_testkit::diff::*;

fn info(c: &mut Conn, section: &str) -> String {
    match c.cmd(&["INFO", section]) {
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO {section}: {other:?}"),
    }
}

/// errorstat lines, total_error_replies and calls/rejected/failed of the commands involved.
fn stats(c: &mut Conn) -> Vec<String> {
    let mut out: Vec<String> = info(c, "errorstats")
        .lines()
        .filter(|l| l.starts_with("errorstat_"))
        .map(str::to_string)
        .collect();
    out.extend(
        info(c, "stats")
            .lines()
            .filter(|l| l.starts_with("total_error_replies:"))
            .map(str::to_string),
    );
    let mut cmds = Vec::new();
    for l in info(c, "commandstats").lines() {
        let Some((name, rest)) = l.split_once(':') else {
            continue;
        };
        if matches!(
            name,
            "cmdstat_set"
                | "cmdstat_eval"
                | "cmdstat_eval_ro"
                | "cmdstat_select"
                | "cmdstat_geoadd"
                | "cmdstat_get"
                | "cmdstat_incr"
        ) {
            let kept: Vec<&str> = rest
                .split(',')
                .filter(|f| {
                    f.starts_with("calls=")
                        || f.starts_with("rejected_calls=")
                        || f.starts_with("failed_calls=")
                })
                .collect();
            cmds.push(format!("{name}:{}", kept.join(",")));
        }
    }
    // Redis lists commandstats in its dict's order.
    cmds.sort();
    out.extend(cmds);
    out
}

#[test]
fn script_error_accounting_matches_redis() {
    let pcall_oom = "local t = redis.pcall('set','x','y')
if t['err'] == \"OOM command not allowed when used memory > 'maxmemory'.\" then return 1 else return 0 end";
    let pcall_select = "local t = redis.pcall('select',99)
if t['err'] == 'ERR DB index is out of range' then return 1 else return 0 end";
    let pcall_ro = "local t = redis.pcall('set','x','y')
if t['err'] == 'ERR Write commands are not allowed from read-only scripts.' then return 1 else return 0 end";
    let geoadd = "return redis.call('GEOADD', 'Sicily', '13.361389', '38.115556', 'Palermo', '15.087269', '37.502669', 'Catania')";
    let steps: Vec<Vec<&str>> = vec![
        vec!["CONFIG", "SET", "maxmemory", "1"],
        vec!["EVAL", "return redis.call('set','x','y')", "1", "x"],
        vec!["EVAL", pcall_oom, "1", "x"],
        vec!["EVAL", "return redis.pcall('set','x','y')", "1", "x"],
        vec!["CONFIG", "SET", "maxmemory", "0"],
        vec!["EVAL", "return redis.call('select',99)", "0"],
        vec!["EVAL", pcall_select, "0"],
        vec!["EVAL_RO", "return redis.call('set','x','y')", "1", "x"],
        vec!["EVAL_RO", pcall_ro, "1", "x"],
        vec!["SET", "Sicily", "1"],
        vec!["EVAL", geoadd, "1", "x"],
        vec!["EVAL", "return redis.call('nosuchcommand')", "0"],
        vec!["EVAL", "return redis.pcall('nosuchcommand')", "0"],
        vec!["EVAL", "return redis.call('get','a','b')", "0"],
        vec!["EVAL", "return redis.call('get', {})", "0"],
        vec!["EVAL", "return redis.call()", "0"],
        vec!["EVAL", "return redis.error_reply('MY err')", "0"],
        vec!["EVAL", "return {err='ERR plain'}", "0"],
        vec!["EVAL", "error('boom')", "0"],
        vec![
            "EVAL",
            "redis.pcall('set','x','y','NX','XX'); return 1",
            "0",
        ],
    ];
    let run = |s: &Server| {
        let mut c = Conn::connect(s.port);
        let mut out = Vec::new();
        for step in &steps {
            c.cmd(&["CONFIG", "RESETSTAT"]);
            let r = c.cmd(step);
            out.push(format!("{step:?} -> {r:?}"));
            for l in stats(&mut c) {
                out.push(format!("    {l}"));
            }
        }
        out
    };
    let (r, t) = (redis(), tessera());
    let (want, got) = (run(&r), run(&t));
    assert_eq!(got.join("\n"), want.join("\n"));
}
