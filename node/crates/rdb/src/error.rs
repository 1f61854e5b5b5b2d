//! Typed errors for the RDB / DUMP / AOF format code.

/// Anything that can go wrong while reading or writing RDB data.
///
/// Corrupt input always maps to one of these variants: the reader never panics on bad bytes.
#[derive(Debug, thiserror::Error)]
pub enum RdbError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("unexpected end of RDB data")]
    Truncated,
    #[error("not an RDB file: bad magic")]
    BadMagic,
    #[error("unsupported RDB version {0}")]
    UnsupportedVersion(u16),
    #[error("RDB checksum mismatch: stored {stored:#018x}, computed {computed:#018x}")]
    Checksum { stored: u64, computed: u64 },
    #[error("unsupported RDB value type {name} ({code})")]
    UnsupportedType { code: u8, name: &'static str },
    #[error("unsupported RDB module value (module {0})")]
    UnsupportedModule(String),
    #[error("unknown RDB type or opcode {0}")]
    UnknownType(u8),
    #[error("corrupt RDB {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
    #[error("trailing bytes after the value")]
    TrailingData,
}

impl RdbError {
    /// The warning Redis logs when it refuses such data (its tests grep for these texts,
    /// e.g. "Zset ziplist integrity check failed").
    pub fn log_line(&self) -> String {
        match self {
            RdbError::Corrupt { what, detail } if detail.starts_with("Duplicate") => {
                format!("{detail} ({what})")
            }
            RdbError::Corrupt { what, detail } => {
                format!("{what} integrity check failed: {detail}")
            }
            other => other.to_string(),
        }
    }

    pub(crate) fn corrupt(what: &'static str, detail: impl Into<String>) -> Self {
        RdbError::Corrupt {
            what,
            detail: detail.into(),
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = RdbError> = std::result::Result<T, E>;
