//! The typed side of the directive table: [`Settings`], one field per directive, generated
//! by `directives!` from the same line that declares the directive's name, kind, default
//! and mutability (directives.rs). Readers name a field (`cfg.maxmemory`,
//! `cfg.appendfsync`), so a misspelt directive no longer compiles where a string lookup
//! silently read 0/false/"".

use std::path::PathBuf;

use super::BufLimit;

/// Reads a directive's normalised value (as CONFIG GET shows it) into its field's type.
pub trait Decode: Sized {
    fn decode(shown: &str) -> Option<Self>;
}

impl Decode for bool {
    fn decode(s: &str) -> Option<bool> {
        match s {
            "yes" => Some(true),
            "no" => Some(false),
            _ => None,
        }
    }
}

macro_rules! decode_parsed {
    ($($t:ty),*) => {$(
        impl Decode for $t {
            fn decode(s: &str) -> Option<$t> {
                s.parse().ok()
            }
        }
    )*};
}
decode_parsed!(u16, u32, u64, i64);

/// A file mode written in octal (unixsocketperm): its value, not its digits read as decimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileMode(pub u32);

impl Decode for FileMode {
    fn decode(s: &str) -> Option<FileMode> {
        u32::from_str_radix(s, 8).ok().map(FileMode)
    }
}

impl Decode for String {
    fn decode(s: &str) -> Option<String> {
        Some(s.to_string())
    }
}

impl Decode for PathBuf {
    fn decode(s: &str) -> Option<PathBuf> {
        Some(PathBuf::from(s))
    }
}

/// `save`: (seconds, changes) points; "" = none.
impl Decode for Vec<(u64, u64)> {
    fn decode(s: &str) -> Option<Self> {
        let w = s
            .split_whitespace()
            .map(|x| x.parse::<u64>().ok())
            .collect::<Option<Vec<u64>>>()?;
        if !w.len().is_multiple_of(2) {
            return None;
        }
        Some(w.chunks_exact(2).map(|p| (p[0], p[1])).collect())
    }
}

/// `replicaof`: "host port", or "" when this node is no replica.
impl Decode for Option<(String, u16)> {
    fn decode(s: &str) -> Option<Self> {
        let mut w = s.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (None, _, _) => Some(None),
            (Some(h), Some(p), None) => Some(Some((h.to_string(), p.parse().ok()?))),
            _ => None,
        }
    }
}

/// `latency-tracking-info-percentiles`.
impl Decode for Vec<f64> {
    fn decode(s: &str) -> Option<Self> {
        s.split_whitespace().map(|w| w.parse().ok()).collect()
    }
}

/// `client-output-buffer-limit` as CONFIG GET shows it: "normal h s secs slave ... pubsub ...".
impl Decode for [BufLimit; 3] {
    fn decode(s: &str) -> Option<Self> {
        let w: Vec<&str> = s.split_whitespace().collect();
        let mut out = [BufLimit::default(); 3];
        for (i, (class, lim)) in ["normal", "slave", "pubsub"]
            .iter()
            .zip(&mut out)
            .enumerate()
        {
            let ch = w.get(i * 4..i * 4 + 4)?;
            if ch[0] != *class {
                return None;
            }
            *lim = BufLimit {
                hard: ch[1].parse().ok()?,
                soft: ch[2].parse().ok()?,
                soft_secs: ch[3].parse().ok()?,
            };
        }
        (w.len() == 12).then_some(out)
    }
}

/// An enum directive's options, in the order Redis lists them in its error text.
macro_rules! config_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? } default $def:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant,)+
        }

        impl $name {
            /// The option names (the directive table's `Kind::Enum`).
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The name CONFIG GET shows.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl Default for $name {
            fn default() -> $name {
                $name::$def
            }
        }

        impl Decode for $name {
            fn decode(s: &str) -> Option<$name> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

config_enum! {
    /// `appendfsync`.
    Appendfsync { Everysec = "everysec", Always = "always", No = "no" } default Everysec
}

config_enum! {
    /// `maxmemory-policy`.
    MaxmemoryPolicy {
        VolatileLru = "volatile-lru",
        VolatileLfu = "volatile-lfu",
        VolatileRandom = "volatile-random",
        VolatileTtl = "volatile-ttl",
        AllkeysLru = "allkeys-lru",
        AllkeysLfu = "allkeys-lfu",
        AllkeysRandom = "allkeys-random",
        Noeviction = "noeviction",
    } default Noeviction
}

impl MaxmemoryPolicy {
    /// Keys carry an LFU counter instead of an LRU clock.
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::VolatileLfu | MaxmemoryPolicy::AllkeysLfu
        )
    }

    /// Only keys with a TTL may be evicted.
    pub fn is_volatile(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::VolatileLru
                | MaxmemoryPolicy::VolatileLfu
                | MaxmemoryPolicy::VolatileRandom
                | MaxmemoryPolicy::VolatileTtl
        )
    }
}

config_enum! {
    /// `loglevel`.
    LogLevel { Debug = "debug", Verbose = "verbose", Notice = "notice", Warning = "warning" } default Notice
}

config_enum! {
    /// `cluster-preferred-endpoint-type`.
    PreferredEndpoint { Ip = "ip", Hostname = "hostname", UnknownEndpoint = "unknown-endpoint" } default Ip
}

config_enum! {
    /// `enable-debug-command`, `enable-protected-configs`, `enable-module-command`: Redis's
    /// protected actions (yes, or local = from loopback / a unix socket only).
    Protected { No = "no", Yes = "yes", Local = "local" } default No
}

/// Declares the directive table and [`Settings`] from one line per directive:
/// `field: Type = d|im("name", Kind, "default");` (`im`: immutable).
macro_rules! directives {
    ($($field:ident : $ty:ty = $ctor:ident($name:literal, $kind:expr, $default:literal);)+) => {
        /// Every directive tessera-node accepts (see the table above for each one's field).
        pub static DIRECTIVES: &[Directive] = &[$($ctor($name, $kind, $default),)+];

        /// Every directive's value, typed: one field per line of the directive table. Built
        /// whole from the normalised values whenever the config changes (never edited in
        /// place), so a snapshot is always consistent.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Settings {
            $(#[doc = concat!("`", $name, "` (default \"", $default, "\")")]
            pub $field: $ty,)+
        }

        impl Settings {
            /// Decodes each directive's normalised value. One that does not decode (never
            /// expected: the values were validated when set; a unit test checks every kind)
            /// reads as its default.
            pub(super) fn decode_from<'a>(value: impl Fn(&'static str) -> Cow<'a, str>) -> Settings {
                Settings {
                    $($field: <$ty as Decode>::decode(&value($name))
                        .or_else(|| <$ty as Decode>::decode($default))
                        .unwrap_or_default(),)+
                }
            }

            /// The directives whose value would not decode (for tests).
            #[cfg(test)]
            pub(super) fn undecodable<'a>(value: impl Fn(&'static str) -> Cow<'a, str>) -> Vec<&'static str> {
                let mut bad = Vec::new();
                $(if <$ty as Decode>::decode(&value($name)).is_none() {
                    bad.push($name);
                })+
                bad
            }
        }
    };
}
