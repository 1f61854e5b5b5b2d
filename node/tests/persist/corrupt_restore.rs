//! RESTORE of corrupt DUMP payloads (Redis 7.0.15's integration/corrupt-dump): tessera-node
//! refuses ("ERR Bad data format") exactly the payloads redis-server refuses, and accepts the
//! ones it accepts, under the same sanitize-dump-payload setting; each refusal is logged with
//! Redis's "integrity check failed" wording, which that suite greps.

use tessera_testkit::*;

/// (what, sanitize-dump-payload, payload as written in corrupt-dump.tcl: Tcl escapes).
const CASES: &[(&str, &str, &str)] = &[
    (
        "valid zipped hash header, dup records",
        "no",
        r"\x0D\x1B\x1B\x00\x00\x00\x16\x00\x00\x00\x04\x00\x00\x02\x61\x00\x04\x02\x62\x00\x04\x02\x61\x00\x04\x02\x64\x00\xFF\x09\x00\xA1\x98\x36\x78\xCC\x8E\x93\x2E",
    ),
    (
        "quicklist big ziplist prev len",
        "no",
        r"\x0E\x01\x13\x13\x00\x00\x00\x0E\x00\x00\x00\x02\x00\x00\x02\x61\x00\x0E\x02\x62\x00\xFF\x09\x00\x49\x97\x30\xB2\x0D\xA1\xED\xAA",
    ),
    (
        "quicklist small ziplist prev len",
        "yes",
        r"\x0E\x01\x13\x13\x00\x00\x00\x0E\x00\x00\x00\x02\x00\x00\x02\x61\x00\x02\x02\x62\x00\xFF\x09\x00\xC7\x71\x03\x97\x07\x75\xB0\x63",
    ),
    (
        "quicklist encoded_len is 0",
        "no",
        r"\x12\x01\x01\x00\x0a\x00\x8f\xc6\xc0\x57\x1c\x0a\xb3\x3c",
    ),
    (
        "hash listpack with duplicate records",
        "yes",
        r"\x10\x17\x17\x00\x00\x00\x04\x00\x82\x61\x00\x03\x82\x62\x00\x03\x82\x61\x00\x03\x82\x64\x00\x03\xff\x0a\x00\xc0\xcf\xa6\x87\xe5\xa7\xc5\xbe",
    ),
    (
        "hash ziplist uneven record count",
        "no",
        r"\r\x1b\x1b\x00\x00\x00\x16\x00\x00\x00\x04\x00\x00\x02a\x00\x04\x02b\x00\x04\x02a\x00\x04\x02d\x00\xff\t\x00\xa1\x98\x36x\xcc\x8e\x93\x2e",
    ),
    (
        "hash duplicate records",
        "yes",
        r"\x04\x02\x01a\x01b\x01a\x01d\t\x00\xc6\x9c\xab\xbc\bk\x0c\x06",
    ),
    (
        "leak in rdbloading due to dup entry in set",
        "no",
        r"\x02\x0A\x02\x5F\x39\xC0\x06\x02\x5F\x31\xC0\x00\xC0\x04\x02\x5F\x35\xC0\x02\xC0\x08\x02\x5F\x31\x02\x5F\x33\x09\x00\x7A\x5A\xFB\x90\x3A\xE9\x3C\xBE",
    ),
    (
        "zset ziplist invalid tail offset",
        "no",
        r"\x0C\x19\x19\x00\x00\x00\x02\x00\x00\x00\x06\x00\x00\xF1\x02\xF1\x02\x02\x5F\x31\x04\xF2\x02\xF3\x02\xF3\xFF\x09\x00\x4D\x72\x7B\x97\xCD\x9A\x70\xC1",
    ),
    (
        "valgrind ziplist prevlen reaches outside the ziplist",
        "no",
        r"\x0E\x02\x1B\x1B\x00\x00\x00\x16\x00\x00\x00\x05\x00\x00\x02\x5F\x39\x04\xF9\x02\x02\x5F\x37\x04\xF7\x02\x02\x5F\x35\xFF\x19\x19\x00\x00\x00\x16\x00\x00\x00\x05\x00\x00\xF5\x02\x02\x5F\x33\x04\xF3\x95\x02\x5F\x31\x04\xF1\xFF\x09\x00\x0C\xFC\x99\x2C\x23\x45\x15\x60",
    ),
    (
        "valgrind ziplist prev too big",
        "no",
        r"\x0E\x01\x13\x13\x00\x00\x00\x10\x00\x00\x00\x03\x00\x00\xF3\x02\x02\x5F\x31\xC1\xF1\xFF\x09\x00\xC9\x4B\x31\xFE\x61\xC0\x96\xFE",
    ),
    (
        "valgrind invalid read",
        "no",
        r"\x0F\x02\x10\x00\x00\x01\x73\xDD\xAA\x2A\xB9\x00\x00\x00\x00\x00\x00\x00\x00\xC3\x40\x4B\x40\x5C\x18\x5C\x00\x00\x00\x24\x00\x05\x01\x00\x01\x02\x01\x84\x69\x74\x65\x6D\x05\x85\x76\x61\x6C\x75\x65\x06\x40\x10\x00\x00\x20\x01\x00\x01\x20\x03\x00\x05\x20\x1C\x40\x07\x05\x01\x01\x82\x5F\x31\x03\x80\x0D\x40\x00\x00\x02\x60\x19\x40\x27\x40\x19\x00\x33\x60\x19\x40\x29\x02\x01\x01\x04\x20\x19\x00\xFF\x10\x00\x00\x01\x73\xDD\xAA\x2A\xBC\x00\x00\x00\x00\x00\x00\x00\x00\xC3\x40\x4D\x40\x5E\x18\x5E\x00\x00\x00\x24\x00\x05\x01\x00\x01\x02\x01\x84\x69\x74\x65\x6D\x05\x85\x76\x61\x6C\x75\x65\x06\x40\x10\x00\x00\x20\x01\x06\x01\x01\x82\x5F\x35\x03\x05\x20\x1E\x17\x0B\x03\x01\x01\x06\x01\x40\x0B\x00\x01\x60\x0D\x02\x82\x5F\x37\x60\x19\x80\x00\x00\x08\x60\x19\x80\x27\x02\x82\x5F\x39\x20\x19\x00\xFF\x0A\x81\x00\x00\x01\x73\xDD\xAA\x2A\xBE\x00\x00\x09\x00\x21\x85\x77\x43\x71\x7B\x17\x88",
    ),
    (
        "hash empty zipmap",
        "no",
        r"\x09\x02\x00\xFF\x09\x00\xC0\xF1\xB8\x67\x4C\x16\xAC\xE3",
    ),
    (
        "valid quicklist ziplist (prev lengths and tail right)",
        "yes",
        r"\x0E\x01\x13\x13\x00\x00\x00\x0E\x00\x00\x00\x02\x00\x00\x02\x61\x00\x04\x02\x62\x00\xFF\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    ),
    (
        "valid quicklist ziplist, no sanitization",
        "no",
        r"\x0E\x01\x13\x13\x00\x00\x00\x0E\x00\x00\x00\x02\x00\x00\x02\x61\x00\x04\x02\x62\x00\xFF\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    ),
];

/// Tcl's backslash escapes as corrupt-dump.tcl uses them (\xHH with up to two digits, \r, \t, \b, \n).
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        match b[i] {
            b'x' => {
                let mut v = 0u8;
                let mut n = 0;
                while n < 2 && i + 1 < b.len() && b[i + 1].is_ascii_hexdigit() {
                    v = v * 16 + (b[i + 1] as char).to_digit(16).unwrap_or(0) as u8;
                    i += 1;
                    n += 1;
                }
                out.push(v);
            }
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'b' => out.push(0x08),
            other => out.push(other),
        }
        i += 1;
    }
    out
}

/// Each payload: same verdict on both servers (and the same value when accepted); tessera's
/// refusals are logged as Redis logs them.
#[test]
fn corrupt_payloads_refused_like_redis() {
    let servers = [Launch::redis(), Launch::tessera()].map(|l| {
        l.args(&["--save", "", "--enable-debug-command", "yes"])
            .logfile()
            .start()
    });
    let mut verdicts = Vec::new();
    for s in &servers {
        let mut c = s.resp();
        c.cmd(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]);
        let mut got = Vec::new();
        for (i, (what, sanitize, payload)) in CASES.iter().enumerate() {
            c.cmd(&["CONFIG", "SET", "sanitize-dump-payload", sanitize]);
            let key = format!("k{i}");
            let p = unescape(payload);
            let args: [&[u8]; 4] = [b"RESTORE", key.as_bytes(), b"0", &p];
            c.raw_write(&tessera_testkit::resp::encode(&args));
            let reply = c.read();
            let content = match c.cmd(&["TYPE", &key]) {
                Reply::Simple(t) if t == "list" => c.cmd(&["LRANGE", &key, "0", "-1"]),
                other => other,
            };
            got.push(format!("{what}: {reply:?} then {content:?}"));
        }
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
        verdicts.push(got);
    }
    let diffs: Vec<String> = verdicts[0]
        .iter()
        .zip(&verdicts[1])
        .filter(|(r, t)| r != t)
        .map(|(r, t)| format!("redis    {r}\ntessera  {t}"))
        .collect();
    assert!(diffs.is_empty(), "differences:\n{}", diffs.join("\n"));
    let log = servers[1].log_tail(400);
    for want in [
        "Zset ziplist integrity check failed",
        "Hash ziplist integrity check failed",
        "Quicklist ziplist integrity check failed",
        "listpack with dup elements",
        "Zipmap integrity check failed",
    ] {
        assert!(log.contains(want), "tessera's log lacks {want:?}:\n{log}");
    }
}
