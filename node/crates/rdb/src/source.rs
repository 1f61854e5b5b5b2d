//! Low-level RDB reading: lengths, strings, doubles, over any `Read`, with a running CRC64.

use std::io::Read;

use bytes::Bytes;
use crc::Digest;

use crate::error::{RdbError, Result};
use crate::{lzf, CRC64};

/// Largest chunk reserved up front for a string whose length came from the file: bigger
/// strings grow as their bytes actually arrive, so a lying length cannot exhaust memory.
const MAX_PREALLOC: u64 = 64 * 1024;

/// A length field: either a plain length or a special string encoding (int / LZF).
pub(crate) enum Len {
    Plain(u64),
    Encoded(u8),
}

const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

/// A reader that counts bytes and keeps the CRC-64/Jones of everything read so far.
pub(crate) struct Source<R> {
    inner: R,
    digest: Digest<'static, u64>,
    pos: u64,
}

impl<R: Read> Source<R> {
    pub(crate) fn new(inner: R) -> Self {
        Source {
            inner,
            digest: CRC64.digest(),
            pos: 0,
        }
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// CRC64 of everything consumed so far.
    pub(crate) fn crc(&self) -> u64 {
        self.digest.clone().finalize()
    }

    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    pub(crate) fn exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                RdbError::Truncated
            } else {
                RdbError::Io(e)
            }
        })?;
        self.digest.update(buf);
        self.pos += buf.len() as u64;
        Ok(())
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.exact(&mut b)?;
        Ok(b)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// Reads `n` bytes, allocating only as the bytes actually arrive.
    pub(crate) fn bytes(&mut self, n: u64) -> Result<Vec<u8>> {
        let mut v = Vec::with_capacity(n.min(MAX_PREALLOC) as usize);
        let got = (&mut self.inner).take(n).read_to_end(&mut v)?;
        if got as u64 != n {
            return Err(RdbError::Truncated);
        }
        self.digest.update(&v);
        self.pos += n;
        Ok(v)
    }

    pub(crate) fn len_enc(&mut self) -> Result<Len> {
        let first = self.u8()?;
        Ok(match first >> 6 {
            0 => Len::Plain(u64::from(first & 0x3f)),
            1 => {
                let second = self.u8()?;
                Len::Plain((u64::from(first & 0x3f) << 8) | u64::from(second))
            }
            2 => match first {
                0x80 => Len::Plain(u64::from(u32::from_be_bytes(self.array()?))),
                0x81 => Len::Plain(u64::from_be_bytes(self.array()?)),
                _ => {
                    return Err(RdbError::corrupt(
                        "length",
                        format!("unknown length prefix {first:#x}"),
                    ))
                }
            },
            _ => Len::Encoded(first & 0x3f),
        })
    }

    /// A plain length (a string encoding here is corruption).
    pub(crate) fn len(&mut self) -> Result<u64> {
        match self.len_enc()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(e) => Err(RdbError::corrupt(
                "length",
                format!("string encoding {e} where a length was expected"),
            )),
        }
    }

    /// A length used as an element count or size in memory.
    pub(crate) fn len_usize(&mut self) -> Result<usize> {
        let n = self.len()?;
        usize::try_from(n).map_err(|_| RdbError::corrupt("length", format!("{n} too large")))
    }

    /// An RDB string in any of its encodings (raw, integer, LZF).
    pub(crate) fn string(&mut self) -> Result<Bytes> {
        match self.len_enc()? {
            Len::Plain(n) => Ok(Bytes::from(self.bytes(n)?)),
            Len::Encoded(ENC_INT8) => Ok(int_bytes(i64::from(self.u8()? as i8))),
            Len::Encoded(ENC_INT16) => Ok(int_bytes(i64::from(i16::from_le_bytes(self.array()?)))),
            Len::Encoded(ENC_INT32) => Ok(int_bytes(i64::from(i32::from_le_bytes(self.array()?)))),
            Len::Encoded(ENC_LZF) => {
                let clen = self.len()?;
                let len = self.len_usize()?;
                let compressed = self.bytes(clen)?;
                Ok(Bytes::from(lzf::decompress(&compressed, len)?))
            }
            Len::Encoded(e) => Err(RdbError::corrupt(
                "string",
                format!("unknown string encoding {e}"),
            )),
        }
    }

    /// A double in the old text form used by ZSET (type 3): length byte + ASCII, or a marker.
    pub(crate) fn text_double(&mut self) -> Result<f64> {
        let len = self.u8()?;
        match len {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let b = self.bytes(u64::from(n))?;
                parse_f64(&b).ok_or_else(|| RdbError::corrupt("double", "not a number"))
            }
        }
    }

    /// A binary little-endian IEEE double (ZSET_2).
    pub(crate) fn binary_double(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }
}

/// Decimal text of an integer, the way Redis materialises integer-encoded strings.
pub(crate) fn int_bytes(v: i64) -> Bytes {
    Bytes::from(v.to_string().into_bytes())
}

/// Parses a score the way Redis's strtod accepts the forms it writes ("inf", "-inf", "1.5").
pub(crate) fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    s.trim().parse::<f64>().ok()
}
