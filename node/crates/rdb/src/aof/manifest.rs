//! The `appendonly.aof.manifest` file of Redis 7's multi-part AOF.
//!
//! Lines look like `file appendonly.aof.1.base.rdb seq 1 type b`: key/value pairs, with file
//! names quoted (C-style escapes) when they contain spaces or special bytes.

use std::fmt;

/// Kind of an AOF file in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AofFileKind {
    /// `b`: the base (an RDB or an AOF snapshot).
    Base,
    /// `h`: history, awaiting deletion after a rewrite.
    History,
    /// `i`: incremental RESP commands after the base.
    Incr,
}

impl AofFileKind {
    fn code(self) -> char {
        match self {
            AofFileKind::Base => 'b',
            AofFileKind::History => 'h',
            AofFileKind::Incr => 'i',
        }
    }
}

/// One `file ... seq ... type ...` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofFileInfo {
    pub name: String,
    pub seq: u64,
    pub kind: AofFileKind,
}

impl AofFileInfo {
    /// The manifest line for this file, as redis writes it (without the newline).
    pub fn line(&self) -> String {
        format!(
            "file {} seq {} type {}",
            repr_if_needed(&self.name),
            self.seq,
            self.kind.code()
        )
    }
}

/// The parsed manifest: at most one base, then incremental files in sequence order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AofManifest {
    pub base: Option<AofFileInfo>,
    pub incr: Vec<AofFileInfo>,
    pub history: Vec<AofFileInfo>,
}

/// A manifest that cannot be used. `Display` is what redis-server 7.0 logs before exiting
/// (its `aofLoadManifestFromFile`), so an operator sees the same report from either server.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("\n*** FATAL AOF MANIFEST FILE ERROR ***\nReading the manifest file, at line {line}\n>>> '{text}'\n{fault}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// The offending line (trimmed, cut to [`MAX_LINE`] bytes).
        text: String,
        fault: ManifestFault,
    },
    #[error("Found an empty AOF manifest")]
    Empty,
}

impl ManifestError {
    /// What is wrong, without the position.
    pub fn fault(&self) -> Option<ManifestFault> {
        match self {
            ManifestError::Line { fault, .. } => Some(*fault),
            ManifestError::Empty => None,
        }
    }
}

/// Why one manifest line was refused. The first six are redis's own messages; the last
/// two are checks redis lacks (a name listed twice would be loaded twice, and deleted while
/// still listed once a rewrite retires the other entry; a sequence number past `i64` has
/// no successor for the next file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ManifestFault {
    #[error("The AOF manifest file contains too long line")]
    TooLong,
    #[error("Invalid AOF manifest file format")]
    Format,
    #[error("File can't be a path, just a filename")]
    NotBaseName,
    #[error("Found duplicate base file information")]
    DuplicateBase,
    #[error("Found a non-monotonic sequence number")]
    NonMonotonic,
    #[error("Unknown AOF file type")]
    UnknownType,
    #[error("Found duplicate file name")]
    DuplicateName,
    #[error("The sequence number is out of range")]
    SeqRange,
}

/// Longest manifest line, newline excluded (redis's AOF_ANNOTATION_LINE_MAX_LEN, which
/// counts the newline: one byte more lenient than redis).
pub const MAX_LINE: usize = 1024;

/// Highest sequence number accepted: redis keeps them in a `long long`, and the node must
/// always be able to number the next file (`seq + 1`).
pub const MAX_SEQ: u64 = i64::MAX as u64 - 1;

/// Whether `name` can name a file inside the AOF directory and nothing else: no path
/// separator (redis's `pathIsBaseName` refuses `/` and `\`), and, beyond redis, not empty,
/// not `.` or `..`, no NUL byte.
pub fn is_base_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| b == b'/' || b == b'\\' || b == 0)
}

impl AofManifest {
    /// Parses a manifest the way Redis 7.0 does (comments with `#`, key/value pairs in any
    /// order with keys case-insensitive, unknown keys ignored, the type being the value's
    /// first byte), and refuses anything that could make the node read, append to or delete
    /// a file outside the AOF directory. Pure: a fuzz target drives it.
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        let mut m = AofManifest::default();
        let mut names: std::collections::HashSet<String> = std::collections::HashSet::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
            let bad = |fault: ManifestFault| ManifestError::Line {
                line: line_no,
                text: cut(line, MAX_LINE).to_string(),
                fault,
            };
            if raw.len() > MAX_LINE {
                return Err(bad(ManifestFault::TooLong));
            }
            // As Redis 7.0's loader: a comment starts at the line's first byte; a blank
            // line is a format error.
            if raw.starts_with('#') {
                continue;
            }
            if line.is_empty() {
                return Err(bad(ManifestFault::Format));
            }
            let args = split_args(line).ok_or_else(|| bad(ManifestFault::Format))?;
            if args.len() < 6 || args.len() % 2 != 0 {
                return Err(bad(ManifestFault::Format));
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for kv in args.chunks_exact(2) {
                let (key, value) = (&kv[0], &kv[1]);
                if key.eq_ignore_ascii_case("file") {
                    if !is_base_name(value) {
                        return Err(bad(ManifestFault::NotBaseName));
                    }
                    name = Some(value.clone());
                } else if key.eq_ignore_ascii_case("seq") {
                    let n = value
                        .parse::<u64>()
                        .map_err(|_| bad(ManifestFault::Format))?;
                    if n == 0 {
                        return Err(bad(ManifestFault::Format));
                    }
                    if n > MAX_SEQ {
                        return Err(bad(ManifestFault::SeqRange));
                    }
                    seq = Some(n);
                } else if key.eq_ignore_ascii_case("type") {
                    kind = Some(match value.as_bytes().first() {
                        Some(b'b') => AofFileKind::Base,
                        Some(b'h') => AofFileKind::History,
                        Some(b'i') => AofFileKind::Incr,
                        Some(_) => return Err(bad(ManifestFault::UnknownType)),
                        None => return Err(bad(ManifestFault::Format)),
                    })
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err(bad(ManifestFault::Format));
            };
            if !names.insert(name.clone()) {
                return Err(bad(ManifestFault::DuplicateName));
            }
            let info = AofFileInfo { name, seq, kind };
            // The node writes this entry back on its next rewrite: it must load then too
            // (quoting can make a name longer than it was read).
            if info.line().len() > MAX_LINE {
                return Err(bad(ManifestFault::TooLong));
            }
            match kind {
                AofFileKind::Base => {
                    if m.base.is_some() {
                        return Err(bad(ManifestFault::DuplicateBase));
                    }
                    m.base = Some(info);
                }
                AofFileKind::History => m.history.push(info),
                AofFileKind::Incr => {
                    if m.incr.last().is_some_and(|l| l.seq >= seq) {
                        return Err(bad(ManifestFault::NonMonotonic));
                    }
                    m.incr.push(info);
                }
            }
        }
        if m.base.is_none() && m.incr.is_empty() {
            return Err(ManifestError::Empty);
        }
        Ok(m)
    }

    /// Files to load, in order: the base, then every incremental file.
    pub fn load_order(&self) -> impl Iterator<Item = &AofFileInfo> {
        self.base.iter().chain(self.incr.iter())
    }

    /// Name Redis gives the manifest for `appendfilename`.
    pub fn manifest_name(prefix: &str) -> String {
        format!("{prefix}.manifest")
    }

    /// Name of base file number `seq` (`rdb` when the base is an RDB preamble).
    pub fn base_name(prefix: &str, seq: u64, rdb: bool) -> String {
        format!("{prefix}.{seq}.base.{}", if rdb { "rdb" } else { "aof" })
    }

    /// Name of incremental file number `seq`.
    pub fn incr_name(prefix: &str, seq: u64) -> String {
        format!("{prefix}.{seq}.incr.aof")
    }
}

impl fmt::Display for AofManifest {
    /// The manifest text as Redis writes it: base, history, then incremental files.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all = self
            .base
            .iter()
            .chain(self.history.iter())
            .chain(self.incr.iter());
        for i in all {
            writeln!(f, "{}", i.line())?;
        }
        Ok(())
    }
}

/// The first `max` bytes of `s` at most, cut on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Quotes a file name the way Redis's sdscatrepr does, when it has spaces or odd bytes.
fn repr_if_needed(s: &str) -> String {
    let needs = s.is_empty()
        || s.bytes().any(|b| {
            b.is_ascii_whitespace()
                || b == b'"'
                || b == b'\''
                || b == b'\\'
                || !(0x21..0x7f).contains(&b)
        });
    if !needs {
        return s.to_string();
    }
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// Splits a line into arguments like Redis's sdssplitargs (double quotes with C escapes,
/// single quotes literal). `None` on unbalanced quotes.
fn split_args(line: &str) -> Option<Vec<String>> {
    let b = line.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let mut cur: Vec<u8> = Vec::new();
        if b[i] == b'"' {
            i += 1;
            loop {
                let c = *b.get(i)?;
                i += 1;
                match c {
                    b'"' => break,
                    b'\\' => {
                        let e = *b.get(i)?;
                        i += 1;
                        match e {
                            b'n' => cur.push(b'\n'),
                            b'r' => cur.push(b'\r'),
                            b't' => cur.push(b'\t'),
                            b'a' => cur.push(0x07),
                            b'b' => cur.push(0x08),
                            b'x' => {
                                let hex = std::str::from_utf8(b.get(i..i + 2)?).ok()?;
                                cur.push(u8::from_str_radix(hex, 16).ok()?);
                                i += 2;
                            }
                            other => cur.push(other),
                        }
                    }
                    c => cur.push(c),
                }
            }
            if i < b.len() && !b[i].is_ascii_whitespace() {
                return None;
            }
        } else if b[i] == b'\'' {
            i += 1;
            loop {
                let c = *b.get(i)?;
                i += 1;
                if c == b'\'' {
                    break;
                }
                cur.push(c);
            }
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                cur.push(b[i]);
                i += 1;
            }
        }
        args.push(String::from_utf8_lossy(&cur).into_owned());
    }
    Some(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis 7.0 refuses a blank line (its suite: "can't load data when there are blank
    /// lines in the manifest file"); only a line starting with `#` is a comment.
    #[test]
    fn blank_lines_are_refused_like_redis() {
        let text = "file a.1.incr.aof seq 1 type i\n\nfile a.3.incr.aof seq 3 type i\n";
        match AofManifest::parse(text) {
            Err(ManifestError::Line { line, fault, .. }) => {
                assert_eq!((line, fault), (2, ManifestFault::Format))
            }
            other => panic!("blank line accepted: {other:?}"),
        }
        assert!(AofManifest::parse("# c\nfile a.1.incr.aof seq 1 type i\n").is_ok());
    }

    #[test]
    fn parse_and_write_redis_manifest() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\n\
                    file appendonly.aof.1.incr.aof seq 1 type i\n\
                    file appendonly.aof.2.incr.aof seq 2 type i\n";
        let m = AofManifest::parse(text).expect("valid");
        assert_eq!(m.base.as_ref().map(|b| b.seq), Some(1));
        assert_eq!(m.incr.len(), 2);
        assert_eq!(m.to_string(), text);
        assert_eq!(m.load_order().count(), 3);
    }

    #[test]
    fn quoted_names_round_trip() {
        let m = AofManifest {
            base: Some(AofFileInfo {
                name: "my file\"x.rdb".into(),
                seq: 3,
                kind: AofFileKind::Base,
            }),
            incr: vec![],
            history: vec![],
        };
        assert_eq!(AofManifest::parse(&m.to_string()).expect("valid"), m);
    }

    #[test]
    fn bad_manifests() {
        assert!(AofManifest::parse("file a seq 1\n").is_err());
        assert!(AofManifest::parse("file a seq x type b\n").is_err());
        assert!(AofManifest::parse("file a seq 1 type b\nfile c seq 2 type b\n").is_err());
        assert!(AofManifest::parse("file \"a seq 1 type b\n").is_err());
        assert!(matches!(
            AofManifest::parse("# only\n"),
            Err(ManifestError::Empty)
        ));
    }

    fn fault(text: &str) -> Option<ManifestFault> {
        AofManifest::parse(text).err().and_then(|e| e.fault())
    }

    #[test]
    fn file_names_must_be_bare() {
        for name in [
            "../victim",
            "/tmp/x/victim",
            "a/b",
            "a\\\\b",
            "\"..\"",
            "\".\"",
            "\"\"",
            "\"a\\x00b\"",
            "\"..\\x2fvictim\"",
        ] {
            let text = format!("file {name} seq 1 type b\n");
            assert_eq!(fault(&text), Some(ManifestFault::NotBaseName), "{text}");
        }
        let e = AofManifest::parse("# c\nfile ../victim seq 1 type b\n").expect_err("refused");
        assert_eq!(
            e.to_string(),
            "\n*** FATAL AOF MANIFEST FILE ERROR ***\nReading the manifest file, at line 2\n\
             >>> 'file ../victim seq 1 type b'\nFile can't be a path, just a filename"
        );
        assert!(is_base_name("appendonly.aof.1.base.rdb"));
        assert!(is_base_name("my file..x"));
    }

    #[test]
    fn redis_faults() {
        assert_eq!(fault("file a seq 1\n"), Some(ManifestFault::Format));
        assert_eq!(fault("file a seq 0 type b\n"), Some(ManifestFault::Format));
        assert_eq!(
            fault("file a seq 1 type \"\"\n"),
            Some(ManifestFault::Format)
        );
        assert_eq!(
            fault("file a seq 1 type x\n"),
            Some(ManifestFault::UnknownType)
        );
        assert_eq!(
            fault("file a seq 1 type b\nfile c seq 2 type b\n"),
            Some(ManifestFault::DuplicateBase)
        );
        assert_eq!(
            fault("file a seq 2 type i\nfile c seq 2 type i\n"),
            Some(ManifestFault::NonMonotonic)
        );
        let long = format!("file {} seq 1 type b\n", "a".repeat(MAX_LINE));
        assert_eq!(fault(&long), Some(ManifestFault::TooLong));
        // Keys are case-insensitive, unknown keys ignored, the type is its first byte.
        let m = AofManifest::parse("FILE a SEQ 3 Type base future x\n").expect("valid");
        assert_eq!(m.base.map(|b| (b.name, b.seq)), Some(("a".into(), 3)));
    }

    #[test]
    fn names_and_sequence_numbers_the_node_could_not_use() {
        assert_eq!(
            fault("file a seq 1 type b\nfile a seq 2 type i\n"),
            Some(ManifestFault::DuplicateName)
        );
        assert_eq!(
            fault("file a seq 1 type h\nfile a seq 2 type i\n"),
            Some(ManifestFault::DuplicateName)
        );
        for seq in [
            u64::MAX.to_string(),
            (i64::MAX as u64).to_string(),
            "99999999999999999999999".into(),
        ] {
            let text = format!("file a seq {seq} type i\n");
            let f = fault(&text);
            assert!(
                matches!(f, Some(ManifestFault::SeqRange | ManifestFault::Format)),
                "{text}: {f:?}"
            );
        }
        let top = format!("file a seq {MAX_SEQ} type i\n");
        assert_eq!(
            AofManifest::parse(&top).expect("valid").incr[0].seq,
            MAX_SEQ
        );
    }

    #[test]
    fn what_the_node_writes_back_loads() {
        // 300 bytes read as 300 replacement characters, each written back as 12 bytes.
        let wide = format!("file '{}' seq 1 type b\n", "\u{e9}".repeat(150));
        assert_eq!(fault(&wide), Some(ManifestFault::TooLong));
        let raw = [&b"file '"[..], &[0xff; 300][..], &b"' seq 1 type b\n"[..]].concat();
        let text = String::from_utf8_lossy(&raw);
        assert_eq!(fault(&text), Some(ManifestFault::TooLong));
        for name in [
            "'a b'",
            "\"q\\\"x\"",
            "'\u{e9}'",
            "#x",
            "\"\\xff\"",
            "'tab\there'",
        ] {
            let text = format!("file {name} seq 7 type i\nfile +b seq +3 type b\n");
            let m = AofManifest::parse(&text).expect(&text);
            let again = AofManifest::parse(&m.to_string()).expect("written form loads");
            assert_eq!(again, m, "{text}");
        }
    }
}
