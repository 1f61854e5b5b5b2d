//! What a script may not do, and the exact errors it gets, compared with redis-server 7.0
//! (issue 18: unit/scripting and unit/functions): every command redis flags `noscript`,
//! XREAD / XREADGROUP with BLOCK, CLUSTER RESET, and `redis.register_function` called
//! after FUNCTION LOAD.

use tessera_testkit::diff::*;

/// A simple-string or bulk element of a COMMAND reply.
fn text(r: &Reply) -> Option<String> {
    match r {
        Reply::Simple(s) => Some(s.clone()),
        Reply::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// (name, arity) of every command and subcommand redis flags `noscript`, from its COMMAND
/// reply (names as "container|sub").
fn noscript_commands(c: &mut Conn) -> Vec<(String, i64)> {
    fn entry(e: &Reply, out: &mut Vec<(String, i64)>) {
        let Reply::Array(v) = e else { return };
        let (Some(name), Some(arity)) =
            (v.first().and_then(text), v.get(1).and_then(Reply::as_int))
        else {
            return;
        };
        if let Some(Reply::Array(flags)) = v.get(2) {
            if flags.iter().filter_map(text).any(|f| f == "noscript") {
                out.push((name, arity));
            }
        }
        if let Some(Reply::Array(subs)) = v.get(9) {
            for s in subs {
                entry(s, out);
            }
        }
    }
    let Reply::Array(all) = c.cmd(&["COMMAND"]) else {
        panic!("COMMAND did not answer an array");
    };
    let mut out = Vec::new();
    for e in &all {
        entry(e, &mut out);
    }
    out.sort();
    out
}

/// Every command redis refuses in scripts is refused by tessera-node with the same error,
/// called with redis's arity (so the refusal, not the arity check, answers). Commands
/// tessera-node does not have at all (MODULE, FAILOVER) are left out: their absence is
/// another difference.
#[test]
fn noscript_commands_are_refused_as_redis() {
    let (t, r) = (tessera(), redis());
    let (mut a, mut b) = (t.resp(), r.resp());
    let list = noscript_commands(&mut b);
    assert!(list.len() > 50, "few noscript commands: {list:?}");
    let mut fails = Vec::new();
    let mut checked = 0;
    for (name, arity) in &list {
        let mut args: Vec<String> = name.split('|').map(str::to_string).collect();
        let top = args[0].clone();
        let known = a.cmd(&["COMMAND", "INFO", &top]);
        if matches!(&known, Reply::Array(v) if matches!(v.first(), Some(Reply::NullArray | Reply::Null)))
        {
            continue;
        }
        while (args.len() as i64) < arity.abs() {
            args.push("x".into());
        }
        let lua = format!(
            "return redis.pcall({})",
            args.iter()
                .map(|s| format!("'{s}'"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let (x, y) = (a.cmd(&["EVAL", &lua, "0"]), b.cmd(&["EVAL", &lua, "0"]));
        checked += 1;
        if x != y {
            fails.push(format!("{name}: tessera {x:?}, redis {y:?}"));
        }
    }
    assert!(checked > 50, "only {checked} commands checked");
    assert!(
        fails.is_empty(),
        "{} differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// Scripts whose replies (errors included) must match redis's exactly; `s` is a stream
/// with group `g` made first.
const REFUSED: &[&str] = &[
    "return redis.pcall('xread','STREAMS','s','$')",
    "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')",
    "return redis.pcall('XREAD','COUNT',1,'BLOCK',0,'STREAMS','s','$')",
    "return redis.pcall('xread','BLOCK','abc','STREAMS','s','$')",
    "return redis.pcall('xread','BLOCK')",
    "return redis.pcall('xreadgroup','group','g','c','STREAMS','s','>')",
    "return redis.pcall('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')",
    "return redis.pcall('XREADGROUP','GROUP','g','c','BLOCK',10,'STREAMS','s','>')",
    "return redis.call('xread','BLOCK',0,'STREAMS','s','$')",
    "redis.call('cluster', 'reset', 'hard')",
    "return redis.pcall('cluster', 'reset')",
    "return redis.pcall('CLUSTER', 'RESET', 'SOFT')",
    "return redis.pcall('cluster', 'info')",
    "return redis.pcall('blpop','x',0)",
    "return redis.pcall('bzpopmax','empty_zset', 0)",
];

#[test]
fn blocking_and_cluster_reset_in_scripts_match_redis() {
    let (t, r) = (tessera(), redis());
    let mut fails = Vec::new();
    for c in [&mut t.resp(), &mut r.resp()] {
        assert_eq!(
            c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
            Reply::Simple("OK".into())
        );
    }
    let (mut a, mut b) = (t.resp(), r.resp());
    for s in REFUSED {
        for numkeys in [&["0"][..], &["1", "s"][..]] {
            let mut args = vec!["EVAL", s];
            args.extend_from_slice(numkeys);
            let (x, y) = (a.cmd(&args), b.cmd(&args));
            if x != y {
                fails.push(format!("{args:?}\n  tessera: {x:?}\n  redis:   {y:?}"));
            }
        }
    }
    assert!(
        fails.is_empty(),
        "{} differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// `redis.register_function` reached from a function run by FCALL (through a table kept
/// from the load), and the other registration errors of unit/functions.
#[test]
fn register_function_outside_load_matches_redis() {
    let (t, r) = (tessera(), redis());
    let lib = "#!lua name=lib1\n\
        local lib = redis\n\
        lib.register_function('f1', function () lib.redis = redis; return {ok='OK'} end)\n\
        lib.register_function('f2', function () lib.register_function('f1', function () return 1 end) end)\n\
        lib.register_function{function_name='f3', callback=function () return lib.register_function{function_name='x', callback=function() end} end}";
    let steps: &[&[&str]] = &[
        &["FUNCTION", "LOAD", lib],
        &["FCALL", "f1", "0"],
        &["FCALL", "f2", "0"],
        &["FCALL", "f3", "0"],
        &["EVAL", "redis.register_function('a', function() end)", "0"],
        &["EVAL", "return redis.register_function", "0"],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib2\nredis.register_function('f1', function(keys, args) redis.register_function('f2', function() return 2 end) return 1 end)",
        ],
        &["FCALL", "f1", "0"],
    ];
    let (mut a, mut b) = (t.resp(), r.resp());
    let mut fails = Vec::new();
    for s in steps {
        let (x, y) = (a.cmd(s), b.cmd(s));
        if x != y {
            fails.push(format!("{s:?}\n  tessera: {x:?}\n  redis:   {y:?}"));
        }
    }
    assert!(
        fails.is_empty(),
        "{} differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS 1 lets scripts call commands flagged `noscript` (Redis's
/// test suites use it for DEBUG PROTOCOL and CLIENT LIST from scripts); 0 refuses them again.
#[test]
fn disable_deny_scripts_matches_redis() {
    let args = ["--enable-debug-command", "yes"];
    let (t, r) = (tessera_with(&args), Server::redis(&args));
    let steps: &[&[&str]] = &[
        &[
            "EVAL",
            "return redis.pcall('debug', 'protocol', 'bignum')",
            "0",
        ],
        &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"],
        &[
            "EVAL",
            "return redis.call('debug', 'protocol', 'bignum')",
            "0",
        ],
        &[
            "EVAL",
            "redis.setresp(3); return redis.call('debug', 'protocol', 'map')",
            "0",
        ],
        &[
            "EVAL",
            "redis.setresp(3); return redis.call('debug', 'protocol', 'double')",
            "0",
        ],
        &["EVAL", "return type(redis.call('client', 'list'))", "0"],
        &[
            "EVAL",
            "redis.setresp(3); return redis.call('debug', 'protocol', 'attrib')",
            "0",
        ],
        &[
            "EVAL",
            "return redis.call('debug', 'protocol', 'attrib')",
            "0",
        ],
        &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"],
        &["EVAL", "return redis.pcall('client', 'list')", "0"],
    ];
    let mut fails = Vec::new();
    for resp3 in [false, true] {
        let mut a = Conn::with_proto(t.port, resp3);
        let mut b = Conn::with_proto(r.port, resp3);
        for s in steps {
            let (x, y) = (a.cmd(s), b.cmd(s));
            if x != y {
                fails.push(format!(
                    "resp3 {resp3} {s:?}\n  tessera: {x:?}\n  redis:   {y:?}"
                ));
            }
        }
    }
    assert!(
        fails.is_empty(),
        "{} differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// FUNCTION LOAD's metadata line is split as Redis's sdssplitargs: quoted values, and
/// unbalanced quotes as invalid metadata (unit/functions "function test name with quotes").
#[test]
fn library_metadata_quoting_matches_redis() {
    let (t, r) = (tessera(), redis());
    let (mut a, mut b) = (t.resp(), r.resp());
    let mut fails = Vec::new();
    for meta in [
        "#!lua name=\"foo\"",
        "#!lua name='foo'",
        "#!lua \"name=foo\"",
        "#!lua name=\"foo",
        "#!lua name=\"fo o\"",
        "#!lua name=\"foo\"bar",
        "#!lua name=foo name=bar",
        "#!lua name=\"a\\x41\"",
        "#!\"lua\" name=foo",
    ] {
        let code = format!("{meta}\nredis.register_function('foo', function() return 1 end)");
        let s = ["FUNCTION", "LOAD", "REPLACE", &code];
        let (x, y) = (a.cmd(&s), b.cmd(&s));
        if x != y {
            fails.push(format!("{meta}\n  tessera: {x:?}\n  redis:   {y:?}"));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}
