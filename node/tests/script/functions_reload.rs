//! Function libraries across DEBUG RELOAD, compared with redis-server 7.0 (issue 18,
//! unit/functions "FUNCTION - test debug reload different options" / "... with nosave and
//! noflush"): without NOFLUSH the file's libraries replace the current ones; with NOFLUSH
//! a library already loaded fails the load, unless MERGE lets the file's replace it (the
//! others stay).

use tessera_testkit::diff::*;

fn lib(name: &str, ret: &str) -> String {
    format!("#!lua name={name}\nredis.register_function('{name}', function() return '{ret}' end)")
}

#[test]
fn function_libraries_across_debug_reload_like_redis() {
    let (test, test1, test2) = (
        lib("test", "hello"),
        lib("test1", "hello"),
        lib("test2", "hello"),
    );
    let test1_bye = lib("test1", "bye");
    let cases: Vec<Vec<&str>> = vec![
        vec!["FUNCTION", "LOAD", &test],
        vec!["DEBUG", "RELOAD"],
        vec!["DEBUG", "RELOAD", "NOFLUSH"],
        vec!["FUNCTION", "LIST"],
        vec!["DEBUG", "RELOAD", "NOFLUSH", "MERGE"],
        vec!["FUNCTION", "LIST"],
        vec!["FUNCTION", "DELETE", "test"],
        vec!["SET", "x", "1"],
        vec!["FUNCTION", "LOAD", &test1],
        vec!["DEBUG", "RELOAD"],
        vec!["FUNCTION", "LOAD", &test2],
        vec!["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"],
        vec!["FCALL", "test1", "0"],
        vec!["FCALL", "test2", "0"],
        vec!["FUNCTION", "LOAD", "REPLACE", &test1_bye],
        vec!["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"],
        vec!["FCALL", "test1", "0"],
        vec!["FCALL", "test2", "0"],
        vec!["DEBUG", "RELOAD", "NOSAVE"],
        vec!["FCALL", "test2", "0"],
        vec!["GET", "x"],
    ];
    let run = |s: &Server| {
        let mut c = Conn::connect(s.port);
        cases
            .iter()
            .map(|a| format!("{a:?} -> {:?}", c.cmd(a)))
            .collect::<Vec<_>>()
    };
    let args = ["--enable-debug-command", "yes"];
    let (r, t) = (Server::redis(&args), tessera_with(&args));
    let (want, got) = (run(&r), run(&t));
    let diffs: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("redis:   {w}\ntessera: {g}"))
        .collect();
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
