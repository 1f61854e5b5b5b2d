//! LOLWUT against redis-server 7.0 (issue 18): the deterministic outputs byte for byte
//! (the version line, Schotter's straight first rows, an empty skyline), the random ones by
//! their shape, and the argument errors.

use tessera_testkit::*;

fn both() -> [Server; 2] {
    [Launch::redis(), Launch::tessera()].map(|l| l.args(&["--save", ""]).start())
}

fn raw(c: &mut Conn, args: &[&str]) -> Vec<u8> {
    c.send(args);
    c.read_raw()
}

/// The first bytes of a reply, for a readable failure.
fn head(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let cut: String = s.chars().take(160).collect();
    format!("{cut:?} ({} bytes)", b.len())
}

/// Deterministic LOLWUT calls answer redis-server's exact bytes, in RESP2 (a bulk string)
/// and RESP3 (a verbatim string).
#[test]
fn lolwut_matches_redis() {
    let servers = both();
    let grid: &[&str] = &[
        "LOLWUT",
        "LOLWUT 10 2 2",
        "LOLWUT VERSION",
        "LOLWUT version 7",
        "LOLWUT VERSION 4",
        "LOLWUT VERSION -1",
        "LOLWUT VERSION 59",
        "LOLWUT VERSION 5 10 2 2",
        "LOLWUT VERSION 5 10 3 1",
        "LOLWUT VERSION 5 66 8 2",
        "LOLWUT VERSION 5 1 1 1",
        "LOLWUT VERSION 5 0 -5 1",
        "LOLWUT VERSION 5 3 1 1",
        "LOLWUT VERSION 5 2000 1 1",
        "LOLWUT VERSION 4294967301 2 1 1",
        "LOLWUT VERSION 5 33 9 2 extra",
        "LOLWUT VERSION 6 3 1",
        "LOLWUT VERSION 6 5000 -3",
        "LOLWUT VERSION x",
        "LOLWUT VERSION 5 x",
        "LOLWUT VERSION 5 10 x",
        "LOLWUT VERSION 5 10 2 x",
        "LOLWUT VERSION 6 x",
        "LOLWUT VERSION 6 10 x",
        "LOLWUT VERSION 1.5",
        "COMMAND INFO lolwut",
        "COMMAND DOCS lolwut",
    ];
    let mut diffs = Vec::new();
    for resp3 in [false, true] {
        let [mut rc, mut tc] = servers.each_ref().map(|s| Conn::with_proto(s.port, resp3));
        for line in grid {
            let args: Vec<&str> = line.split(' ').collect();
            let (want, got) = (raw(&mut rc, &args), raw(&mut tc, &args));
            if want != got {
                diffs.push(format!(
                    "resp3={resp3} {line}: redis {} / tessera {}",
                    head(&want),
                    head(&got)
                ));
            }
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// The random pieces (Schotter's lower rows, the skyline) have Redis's dimensions: as many
/// lines, each as many characters, and the same trailer.
#[test]
fn lolwut_random_pieces_have_redis_shape() {
    let servers = both();
    let [mut rc, mut tc] = servers.each_ref().map(|s| s.resp());
    for line in [
        "LOLWUT VERSION 5",
        "LOLWUT VERSION 5 40 5 7",
        "LOLWUT VERSION 6",
        "LOLWUT VERSION 6 30 12",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        let shape = |r: Reply| -> Vec<usize> {
            let Reply::Bulk(b) = r else {
                panic!("{line}: {r:?}")
            };
            let s = String::from_utf8(b).expect("utf-8");
            let mut lines: Vec<&str> = s.lines().collect();
            let trailer = lines.split_off(lines.len().saturating_sub(2));
            // Pixels per line: braille characters, or coloured cells (escapes vary in length).
            let cells = |l: &str| match l.matches(" \x1b[0m").count() {
                0 => l.chars().count(),
                n => n,
            };
            let mut v: Vec<usize> = lines.iter().map(|l| cells(l)).collect();
            v.extend(trailer.iter().map(|l| l.len()));
            v
        };
        assert_eq!(shape(rc.cmd(&args)), shape(tc.cmd(&args)), "{line}");
    }
}
