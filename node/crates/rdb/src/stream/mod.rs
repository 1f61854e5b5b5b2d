//! Streams in RDB files and DUMP payloads: types 15, 19 and 21 (decode), type 19 (encode).

mod decode;
mod encode;

pub(crate) use decode::read_stream;
pub(crate) use encode::write_stream;

#[cfg(test)]
mod tests;
