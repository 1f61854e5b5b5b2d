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

/// The parsed manifest: at most one base, then incremental files in sequence order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AofManifest {
    pub base: Option<AofFileInfo>,
    pub incr: Vec<AofFileInfo>,
    pub history: Vec<AofFileInfo>,
}

/// A manifest that cannot be used, with the 1-based line number.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("invalid AOF manifest at line {line}: {reason}")]
    Invalid { line: usize, reason: String },
    #[error("AOF manifest has no base and no incremental file")]
    Empty,
}

const MAX_LINE: usize = 1024;

impl AofManifest {
    /// Parses a manifest the way Redis 7.0 does (comments with `#`, key/value pairs in any
    /// order, unknown keys ignored).
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        let mut m = AofManifest::default();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let bad = |reason: &str| ManifestError::Invalid {
                line: line_no,
                reason: reason.to_string(),
            };
            if raw.len() > MAX_LINE {
                return Err(bad("line too long"));
            }
            let line = raw.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let args = split_args(line).ok_or_else(|| bad("unbalanced quotes"))?;
            if args.len() < 6 || args.len() % 2 != 0 {
                return Err(bad("expected key/value pairs: file, seq, type"));
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for kv in args.chunks(2) {
                match kv[0].as_str() {
                    "file" => name = Some(kv[1].clone()),
                    "seq" => {
                        seq = Some(kv[1].parse::<u64>().map_err(|_| bad("bad seq"))?);
                    }
                    "type" => {
                        kind = Some(match kv[1].as_str() {
                            "b" => AofFileKind::Base,
                            "h" => AofFileKind::History,
                            "i" => AofFileKind::Incr,
                            _ => return Err(bad("unknown file type")),
                        })
                    }
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err(bad("missing file, seq or type"));
            };
            let info = AofFileInfo { name, seq, kind };
            match kind {
                AofFileKind::Base => {
                    if m.base.is_some() {
                        return Err(bad("duplicate base file"));
                    }
                    m.base = Some(info);
                }
                AofFileKind::History => m.history.push(info),
                AofFileKind::Incr => {
                    if m.incr.last().is_some_and(|l| l.seq >= seq) {
                        return Err(bad("incremental files out of sequence order"));
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
            writeln!(
                f,
                "file {} seq {} type {}",
                repr_if_needed(&i.name),
                i.seq,
                i.kind.code()
            )?;
        }
        Ok(())
    }
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
}
