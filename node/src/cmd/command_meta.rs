//! Redis 7.0.15's per-command metadata for COMMAND INFO: ACL categories, command tips and key
//! specifications (with their flags). These are facts of redis's behaviour that cannot be
//! derived from the node's command flags (APPEND's key is `RW insert`, DEL's `RM delete`,
//! DBSIZE routes `request_policy:all_shards` / `response_policy:agg_sum`...), so they are
//! read from redis-server itself by `gen_command_info.py` (beside this file) into
//! `command_info.txt`, in the token format of `scripts/gen-command-docs.py`.

use hashbrown::HashMap;
use std::sync::OnceLock;

const DATA: &str = include_str!("command_info.txt");

/// One command's metadata: the three RESP values as tokens, plus what the node reads back.
pub struct Meta {
    /// Redis's command flags ("write", "skip_monitor", ...).
    pub flags: Vec<&'static str>,
    /// ACL categories, tips, key specs (three values in token form).
    pub tokens: Vec<&'static str>,
    /// ACL categories ("@read", ...), in redis's order.
    pub acl: Vec<&'static str>,
    /// Flags of each key spec, in spec order.
    pub spec_flags: Vec<Vec<&'static str>>,
}

/// Splits a generated data file into its sections: `= <full name>` lines, each followed by
/// that command's tokens (the format of `scripts/gen-command-docs.py`).
pub(super) fn sections(data: &'static str) -> HashMap<&'static str, Vec<&'static str>> {
    let mut m = HashMap::new();
    let mut cur: Option<(&'static str, Vec<&'static str>)> = None;
    for line in data.lines() {
        if let Some(name) = line.strip_prefix("= ") {
            if let Some((n, t)) = cur.replace((name, Vec::new())) {
                m.insert(n, t);
            }
        } else if let Some((_, t)) = cur.as_mut() {
            t.push(line);
        }
    }
    if let Some((n, t)) = cur {
        m.insert(n, t);
    }
    m
}

/// Full command name ("get", "config|get") → its metadata.
pub fn meta(full_name: &str) -> Option<&'static Meta> {
    static M: OnceLock<HashMap<&'static str, Meta>> = OnceLock::new();
    M.get_or_init(|| {
        sections(DATA)
            .into_iter()
            .map(|(n, t)| (n, Meta::new(t)))
            .collect()
    })
    .get(full_name)
}

/// A parsed token value, enough to read the categories and key-spec flags back.
enum V {
    List(Vec<V>),
    Map(Vec<(V, V)>),
    Str(&'static str),
    Int,
}

impl V {
    fn strs(&self) -> Vec<&'static str> {
        match self {
            V::List(v) => v
                .iter()
                .filter_map(|x| match x {
                    V::Str(s) => Some(*s),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The count of an aggregate token (`*3`, `%2`, `~1`).
pub(super) fn token_len(t: &str) -> usize {
    t.get(1..).and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn parse(toks: &mut impl Iterator<Item = &'static str>) -> V {
    let Some(t) = toks.next() else {
        return V::Int;
    };
    match t.as_bytes().first() {
        Some(b'%') => V::Map(
            (0..token_len(t))
                .map(|_| (parse(toks), parse(toks)))
                .collect(),
        ),
        Some(b'*' | b'~') => V::List((0..token_len(t)).map(|_| parse(toks)).collect()),
        Some(b':') => V::Int,
        _ => V::Str(t.get(1..).unwrap_or("")),
    }
}

impl Meta {
    fn new(mut tokens: Vec<&'static str>) -> Meta {
        let mut it = tokens.iter().copied();
        let flags = parse(&mut it).strs();
        // The remaining tokens are the three values COMMAND INFO replays.
        let rest = tokens.len() - it.len();
        tokens.drain(..rest);
        let mut it = tokens.iter().copied();
        let acl = parse(&mut it).strs();
        let _tips = parse(&mut it);
        let spec_flags = match parse(&mut it) {
            V::List(specs) => specs
                .iter()
                .map(|s| match s {
                    V::Map(kv) => kv
                        .iter()
                        .find(|(k, _)| matches!(k, V::Str("flags")))
                        .map(|(_, v)| v.strs())
                        .unwrap_or_default(),
                    _ => Vec::new(),
                })
                .collect(),
            _ => Vec::new(),
        };
        Meta {
            flags,
            tokens,
            acl,
            spec_flags,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::meta;

    #[test]
    fn reads_back_categories_and_key_spec_flags() {
        let m = meta("append").expect("append");
        assert_eq!(m.acl, ["@write", "@string", "@fast"]);
        assert_eq!(m.spec_flags, [vec!["RW", "insert"]]);
        let m = meta("smove").expect("smove");
        assert_eq!(m.spec_flags.len(), 2);
        assert!(meta("config|get").is_some());
        assert_eq!(meta("eval").expect("eval").flags.len(), 5);
        assert!(meta("no-such-command").is_none());
    }
}
