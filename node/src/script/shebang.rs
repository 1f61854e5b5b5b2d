//! Redis 7.0 script shebang: `#!lua [flags=no-writes,allow-stale,...]` on the first line.

use crate::cmd::CmdError;

/// The flags a script declares (only those this server acts on are kept).
#[derive(Clone, Copy, Default, Debug)]
pub struct ScriptFlags {
    /// `no-writes`: runs as EVAL_RO.
    pub no_writes: bool,
    /// `no-cluster`: refused in cluster mode.
    pub no_cluster: bool,
    /// `allow-oom`: runs, and writes, past maxmemory.
    pub allow_oom: bool,
    /// `allow-cross-slot-keys`: in cluster mode, may touch keys of several slots.
    pub allow_cross_slot: bool,
    /// `allow-stale`: runs on a replica whose link is down with replica-serve-stale-data no.
    pub allow_stale: bool,
    /// The script has a shebang: without `no-writes` it is a write command as a whole.
    pub shebang: bool,
}

const KNOWN: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// Parses the shebang, if any. Returns the flags and, with a shebang, the source to compile:
/// the shebang line commented out so line numbers stay those of the body (as in Redis).
pub fn parse(body: &[u8]) -> Result<(ScriptFlags, Option<Vec<u8>>), CmdError> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags::default(), None));
    }
    let Some(end) = memchr::memchr(b'\n', body) else {
        return Err(CmdError::msg("ERR Invalid script shebang"));
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let mut parts = line.split_ascii_whitespace();
    let engine = parts.next().unwrap_or("");
    if engine != "#!lua" {
        return Err(CmdError::msg(format!(
            "ERR Unexpected engine in script shebang: {engine}"
        )));
    }
    let mut f = ScriptFlags {
        shebang: true,
        ..ScriptFlags::default()
    };
    for p in parts {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(CmdError::msg(format!(
                "ERR Unknown lua shebang option: {p}"
            )));
        };
        for flag in list.split(',').filter(|s| !s.is_empty()) {
            if !KNOWN.contains(&flag) {
                return Err(CmdError::msg(format!(
                    "ERR Unexpected flag in script shebang: {flag}"
                )));
            }
            f.no_writes |= flag == "no-writes";
            f.no_cluster |= flag == "no-cluster";
            f.allow_oom |= flag == "allow-oom";
            f.allow_cross_slot |= flag == "allow-cross-slot-keys";
            f.allow_stale |= flag == "allow-stale";
        }
    }
    let mut src = Vec::with_capacity(body.len() + 2);
    src.extend_from_slice(b"--");
    src.extend_from_slice(body);
    Ok((f, Some(src)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_errors() {
        let (f, src) = parse(b"#!lua flags=no-writes,allow-oom\nreturn 1").expect("ok");
        assert!(f.no_writes && !f.no_cluster);
        assert_eq!(
            src.as_deref(),
            Some(&b"--#!lua flags=no-writes,allow-oom\nreturn 1"[..])
        );
        assert!(parse(b"return 1").expect("ok").1.is_none());
        let err = |b: &[u8]| parse(b).err().map(|e| e.to_string());
        assert_eq!(err(b"#!lua"), Some("ERR Invalid script shebang".into()));
        assert_eq!(
            err(b"#!lua flags=x\n"),
            Some("ERR Unexpected flag in script shebang: x".into())
        );
        assert_eq!(
            err(b"#!py\n"),
            Some("ERR Unexpected engine in script shebang: #!py".into())
        );
    }
}
