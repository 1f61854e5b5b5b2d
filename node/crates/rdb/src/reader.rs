//! Streaming RDB file reader: yields aux fields, db selection and key entries as events.

use std::io::Read;

use bytes::Bytes;
use tracing::debug;

use crate::decode::{module_name, read_value, skip_module_body};
use crate::error::{RdbError, Result};
use crate::source::Source;
use crate::types::*;
use crate::value::RdbValue;

/// Highest RDB version read by default: 80 (Valkey 9; Redis 7.2 is 11, Redis 7.4/8 is 12).
/// Later versions only add types; the ones we do not model (modules, hash field expiry) are
/// reported as typed errors. Pass 10 to [`RdbReader::with_max_version`] to act as Redis 7.0.
pub const DEFAULT_MAX_READ_VERSION: u16 = 80;

/// One key as found in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbEntry {
    pub db: u64,
    pub key: Bytes,
    pub value: RdbValue,
    /// Absolute expiry, Unix time in milliseconds.
    pub expire_ms: Option<i64>,
    /// LRU idle time in seconds (OPCODE_IDLE), when the saving server used an LRU policy.
    pub idle: Option<u64>,
    /// LFU frequency counter (OPCODE_FREQ), when the saving server used an LFU policy.
    pub freq: Option<u8>,
}

/// Things an RDB file says, in file order.
#[derive(Debug, Clone, PartialEq)]
pub enum RdbEvent {
    Aux {
        key: Bytes,
        value: Bytes,
    },
    SelectDb(u64),
    ResizeDb {
        db_size: u64,
        expires_size: u64,
    },
    /// A function library (FUNCTION2 opcode): its source code, for FUNCTION LOAD.
    Function(Bytes),
    /// A module aux record whose body was skipped.
    ModuleAux {
        module: String,
    },
    Entry(RdbEntry),
    /// End of file; `checksum_verified` is false when the file had checksums disabled (0).
    End {
        checksum_verified: bool,
    },
}

/// Reads an RDB stream event by event; also an [`Iterator`] of `Result<RdbEvent>`.
pub struct RdbReader<R> {
    src: Source<R>,
    version: u16,
    db: u64,
    finished: bool,
}

impl<R: Read> RdbReader<R> {
    /// Reads and checks the header (accepting versions up to [`DEFAULT_MAX_READ_VERSION`]).
    pub fn new(r: R) -> Result<Self> {
        Self::with_max_version(r, DEFAULT_MAX_READ_VERSION)
    }

    /// Reads and checks the header, accepting versions `1..=max_version`.
    pub fn with_max_version(r: R, max_version: u16) -> Result<Self> {
        let mut src = Source::new(r);
        let magic: [u8; 9] = src.array()?;
        // Redis writes "REDIS" + 4 digits; Valkey 9 writes "VALKEY" + 3 digits (version 80).
        let digits = if magic.starts_with(b"REDIS") {
            &magic[5..]
        } else if magic.starts_with(b"VALKEY") {
            &magic[6..]
        } else {
            return Err(RdbError::BadMagic);
        };
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(RdbError::BadMagic);
        }
        let digits = std::str::from_utf8(digits).map_err(|_| RdbError::BadMagic)?;
        let version: u16 = digits.parse().map_err(|_| RdbError::BadMagic)?;
        if version == 0 || version > max_version {
            return Err(RdbError::UnsupportedVersion(version));
        }
        Ok(RdbReader {
            src,
            version,
            db: 0,
            finished: false,
        })
    }

    /// The file's RDB version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes consumed so far (useful for error reports and progress).
    pub fn position(&self) -> u64 {
        self.src.position()
    }

    /// Gives back the underlying reader (e.g. to continue with an AOF tail after an RDB
    /// preamble).
    pub fn into_inner(self) -> R {
        self.src.into_inner()
    }

    /// The next event, or `None` after [`RdbEvent::End`].
    pub fn next_event(&mut self) -> Result<Option<RdbEvent>> {
        if self.finished {
            return Ok(None);
        }
        let res = self.read_event();
        if !matches!(res, Ok(Some(_))) {
            self.finished = true;
        }
        if let Ok(Some(RdbEvent::End { .. })) = res {
            self.finished = true;
        }
        res
    }

    fn read_event(&mut self) -> Result<Option<RdbEvent>> {
        let mut expire_ms = None;
        let mut idle = None;
        let mut freq = None;
        loop {
            let op = self.src.u8()?;
            match op {
                OPCODE_EOF => return self.finish().map(Some),
                OPCODE_SELECTDB => {
                    self.db = self.src.len()?;
                    return Ok(Some(RdbEvent::SelectDb(self.db)));
                }
                OPCODE_RESIZEDB => {
                    let db_size = self.src.len()?;
                    let expires_size = self.src.len()?;
                    return Ok(Some(RdbEvent::ResizeDb {
                        db_size,
                        expires_size,
                    }));
                }
                OPCODE_AUX => {
                    let key = self.src.string()?;
                    let value = self.src.string()?;
                    return Ok(Some(RdbEvent::Aux { key, value }));
                }
                OPCODE_FUNCTION2 => return Ok(Some(RdbEvent::Function(self.src.string()?))),
                OPCODE_FUNCTION_PRE_GA => {
                    return Err(RdbError::UnsupportedType {
                        code: op,
                        name: "pre-GA function library",
                    })
                }
                OPCODE_MODULE_AUX => {
                    let id = self.src.len()?;
                    let when_opcode = self.src.len()?;
                    let _when = self.src.len()?;
                    if when_opcode != 2 {
                        return Err(RdbError::corrupt("module aux", "bad when opcode"));
                    }
                    skip_module_body(&mut self.src)?;
                    let module = module_name(id);
                    debug!(%module, "skipped module aux data");
                    return Ok(Some(RdbEvent::ModuleAux { module }));
                }
                OPCODE_SLOT_INFO => {
                    // Redis 7.4 slot sizing hints: three lengths, nothing to load.
                    for _ in 0..3 {
                        self.src.len()?;
                    }
                }
                OPCODE_EXPIRETIME_MS => {
                    expire_ms = Some(i64::from_le_bytes(self.src.array()?));
                }
                OPCODE_EXPIRETIME => {
                    let secs = i32::from_le_bytes(self.src.array()?);
                    expire_ms = Some(i64::from(secs) * 1000);
                }
                OPCODE_IDLE => idle = Some(self.src.len()?),
                OPCODE_FREQ => freq = Some(self.src.u8()?),
                ty => {
                    let key = self.src.string()?;
                    let value = read_value(&mut self.src, ty)?;
                    return Ok(Some(RdbEvent::Entry(RdbEntry {
                        db: self.db,
                        key,
                        value,
                        expire_ms,
                        idle,
                        freq,
                    })));
                }
            }
        }
    }

    fn finish(&mut self) -> Result<RdbEvent> {
        if self.version < 5 {
            return Ok(RdbEvent::End {
                checksum_verified: false,
            });
        }
        let computed = self.src.crc();
        let stored = u64::from_le_bytes(self.src.array()?);
        if stored == 0 {
            return Ok(RdbEvent::End {
                checksum_verified: false,
            });
        }
        if stored != computed {
            return Err(RdbError::Checksum { stored, computed });
        }
        Ok(RdbEvent::End {
            checksum_verified: true,
        })
    }
}

impl<R: Read> Iterator for RdbReader<R> {
    type Item = Result<RdbEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

/// Reads a whole RDB stream and returns its entries (aux and other events are dropped).
pub fn read_entries<R: Read>(r: R) -> Result<Vec<RdbEntry>> {
    let mut out = Vec::new();
    for ev in RdbReader::new(r)? {
        if let RdbEvent::Entry(e) = ev? {
            out.push(e);
        }
    }
    Ok(out)
}
