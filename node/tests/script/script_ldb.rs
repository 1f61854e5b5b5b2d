//! The Lua debugger (SCRIPT DEBUG SYNC), compared with redis-server 7.0: sessions driven
//! over RESP (the debugger's replies are arrays of status lines) and through
//! `redis-cli --ldb-sync-mode --eval` with the commands piped in (issue 18, unit/scripting
//! "Test scripting debug protocol parsing" / "debug lua stack overflow").

use std::process::{Command, Stdio};
use std::time::Duration;

use tessera_testkit::diff::*;
use tessera_testkit::server::wait_exit;

/// A script touching every kind of debugger output: locals, tables, redis.call traffic
/// (a status, a bulk, an error reply, refused calls), redis.debug, redis.breakpoint.
const SCRIPT: &str = "local a = 1
local b = {1,2,3,x='y'}
redis.call('set', KEYS[1], ARGV[1])
redis.debug('hello', a, b)
local c = redis.call('get', KEYS[1])
redis.pcall('incr', KEYS[1])
redis.pcall('nosuchcmd')
redis.pcall('set', 'k')
local nested = {a={b={c={d={e={f={g={h={i={j={k={l=1}}}}}}}}}}}}
if a == 1 then
  redis.breakpoint()
  a = 2
end
return {a, c}
";

/// Debugger commands, one per line (as typed at redis-cli's prompt).
const SESSION: &[&str] = &[
    "s",
    "s",
    "p",
    "p b",
    "p KEYS",
    "p ARGV",
    "p nosuch",
    "s",
    "s",
    "s",
    "s",
    "s",
    "s",
    "p nested",
    "l",
    "l 3 1",
    "l 0",
    "w",
    "b 12",
    "b",
    "b 99",
    "b abc",
    "b 12",
    "b -12",
    "b -5",
    "b 0",
    "t",
    "e a + 41",
    "e {1,2,{x=1}}",
    "e error('boom')",
    "e 1/0",
    "e redis.call('ping')",
    "r set x y",
    "r incr x",
    "r get x",
    "r nosuch",
    "r set",
    "r eval 'return 1' 0",
    "m",
    "m 70",
    "r set long 01234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "r get long",
    "m 0",
    "r get long",
    "m -3",
    "h",
    "foo",
    "r",
    "c",
];

/// Runs `args` (one debugger command) and returns the debugger's reply lines.
fn step(c: &mut Conn, args: &[&[u8]]) -> Reply {
    c.raw_write(&tessera_testkit::resp::encode(args));
    c.read()
}

/// One whole session over RESP: every reply, then the EVAL's own reply, the
/// `<endsession>` mark and whether the server then closed the connection.
fn resp_session(s: &Server) -> Vec<String> {
    let mut c = Conn::connect(s.port);
    let mut out = vec![format!("{:?}", c.cmd(&["SCRIPT", "DEBUG", "SYNC"]))];
    c.send(&["EVAL", SCRIPT, "1", "k1", "v1"]);
    out.push(format!("{:?}", c.read()));
    for line in SESSION {
        let args: Vec<&[u8]> = split(line);
        out.push(format!("{line}: {:?}", step(&mut c, &args)));
    }
    // After `c` the script runs to redis.breakpoint() and stops again.
    out.push(format!("{:?}", step(&mut c, &[b"c"])));
    // The EVAL's reply follows <endsession>; then the connection closes.
    out.push(format!("{:?}", c.read()));
    out.push(format!("closed: {}", c.closed()));
    out
}

/// A debugger command line split on spaces, a quoted argument kept whole.
fn split(line: &str) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = line.as_bytes();
    loop {
        while let [b' ', tail @ ..] = rest {
            rest = tail;
        }
        let (word, tail) = match rest {
            [] => return out,
            [b'\'', q @ ..] => {
                let end = q.iter().position(|&c| c == b'\'').unwrap_or(q.len());
                (&q[..end], q.get(end + 1..).unwrap_or_default())
            }
            _ => {
                let end = rest.iter().position(|&c| c == b' ').unwrap_or(rest.len());
                rest.split_at(end)
            }
        };
        out.push(word);
        rest = tail;
    }
}

#[test]
fn debugger_session_over_resp_matches_redis() {
    let (r, t) = (redis(), tessera());
    let (want, got) = (resp_session(&r), resp_session(&t));
    let diffs: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("redis:   {w}\ntessera: {g}"))
        .collect();
    assert!(
        diffs.is_empty() && want.len() == got.len(),
        "{}",
        diffs.join("\n")
    );
    // The session's writes are kept (SYNC mode), and the server serves again.
    let mut c = Conn::connect(t.port);
    assert_eq!(c.cmd(&["GET", "k1"]), Reply::Bulk(b"v1".to_vec()));
}

/// unit/scripting's "Test scripting debug protocol parsing" and "Test scripting debug lua
/// stack overflow", and an `abort`, against both servers.
#[test]
fn debugger_protocol_edges_match_redis() {
    let session = |s: &Server| {
        let mut out = Vec::new();
        let mut c = Conn::connect(s.port);
        c.cmd(&["SCRIPT", "DEBUG", "SYNC"]);
        c.send(&["EVAL", "return 'hello'", "0"]);
        out.push(format!("{:?}", c.read()));
        for bad in [
            &b"'hello\0world'"[..],
            b"'hello\0'",
            b"'\0hello'",
            b"'\0hello\0'",
        ] {
            out.push(format!("{:?}", step(&mut c, &[bad])));
        }
        // `redis` with 100 arguments: the Lua stack holds them, the command is unknown.
        let mut cmd = b"*101\r\n$5\r\nredis\r\n".to_vec();
        for _ in 0..100 {
            cmd.extend_from_slice(b"$4\r\ntest\r\n");
        }
        c.raw_write(&cmd);
        out.push(format!("{:?}", c.read()));
        // A second EVAL inside the session is the debugger's `eval`.
        out.push(format!(
            "{:?}",
            step(&mut c, &[b"eval", b"return 'hello'", b"0"])
        ));
        out.push(format!("{:?}", step(&mut c, &[b"abort"])));
        out.push(format!("{:?}", c.read()));
        out.push(format!("closed: {}", c.closed()));
        // Not a pipeline's tail; EVALSHA refused; numkeys checked inside the session.
        let mut c = Conn::connect(s.port);
        c.raw_write(b"PING\r\nSCRIPT DEBUG SYNC\r\n");
        out.push(format!("{:?} {:?}", c.read(), c.read()));
        out.push(format!("{:?}", c.cmd(&["SCRIPT", "DEBUG", "SYNC"])));
        out.push(format!(
            "{:?}",
            c.cmd(&["EVALSHA", "0123456789012345678901234567890123456789", "0"])
        ));
        c.send(&["EVAL", "return 1", "5"]);
        out.push(format!("{:?} {:?}", c.read(), c.read()));
        out.push(format!("closed: {}", c.closed()));
        // SCRIPT DEBUG NO turns it off again.
        let mut c = Conn::connect(s.port);
        out.push(format!("{:?}", c.cmd(&["SCRIPT", "DEBUG", "SYNC"])));
        out.push(format!("{:?}", c.cmd(&["SCRIPT", "DEBUG", "NO"])));
        out.push(format!("{:?}", c.cmd(&["EVAL", "return 7", "0"])));
        out.push(format!("{:?}", c.cmd(&["SCRIPT", "DEBUG", "MAYBE"])));
        out
    };
    let (r, t) = (redis(), tessera());
    assert_eq!(session(&t), session(&r));
}

/// A script looping past busy-reply-threshold stops in the debugger ("timeout reached,
/// infinite loop?"), and a client that leaves then does not leave the server blocked.
#[test]
fn debugger_stops_a_looping_script_like_redis() {
    let session = |s: &Server| {
        let mut out = Vec::new();
        let mut c = Conn::connect(s.port);
        c.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
        c.cmd(&["SCRIPT", "DEBUG", "SYNC"]);
        c.send(&[
            "EVAL",
            "local i = 0\nwhile true do\n  i = i + 1\nend\n",
            "0",
        ]);
        out.push(format!("{:?}", c.read()));
        out.push(format!("{:?}", step(&mut c, &[b"c"])));
        // Gone while stopped in a loop: the script is stopped with an error.
        drop(c);
        let mut c = Conn::connect(s.port);
        out.push(format!("{:?}", c.cmd(&["PING"])));
        out
    };
    let (r, t) = (redis(), tessera());
    assert_eq!(session(&t), session(&r));
}

/// `redis-cli --ldb-sync-mode --eval` with the commands piped in: the transcripts match.
fn cli_transcript(s: &Server, dir: &std::path::Path) -> String {
    let script = dir.join("debugged.lua");
    std::fs::write(&script, SCRIPT).expect("write script");
    let input = dir.join("input.txt");
    let mut text = SESSION
        .iter()
        .filter(|l| !l.contains('\''))
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    text.push_str("c\n");
    std::fs::write(&input, text).expect("write input");
    let out = dir.join(format!("out.{}", s.port));
    let mut child = Command::new(tessera_testkit::bins::redis_cli_bin())
        .args(["-p", &s.port.to_string(), "--ldb-sync-mode", "--eval"])
        .arg(&script)
        .args(["k1", ",", "v1"])
        .stdin(std::fs::File::open(&input).expect("input"))
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-cli");
    let status = wait_exit(&mut child, Duration::from_secs(60));
    tessera_testkit::server::kill(&mut child);
    assert!(status.is_some(), "redis-cli --ldb-sync-mode did not end");
    String::from_utf8_lossy(&std::fs::read(&out).unwrap_or_default()).into_owned()
}

#[test]
fn redis_cli_ldb_sync_transcript_matches_redis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (r, t) = (redis(), tessera());
    let (want, got) = (
        cli_transcript(&r, dir.path()),
        cli_transcript(&t, dir.path()),
    );
    assert!(want.contains("<debug> line 4:"), "{want}");
    assert_eq!(got, want);
}
