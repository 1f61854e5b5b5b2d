//! Pure format parts of Redis 7 multi-part AOF persistence: the manifest and a RESP command
//! reader for AOF files.

mod manifest;
mod resp;

pub use manifest::{
    is_base_name, AofFileInfo, AofFileKind, AofManifest, ManifestError, ManifestFault, MAX_LINE,
    MAX_SEQ,
};
pub use resp::{
    encode_command, encode_timestamp_annotation, has_rdb_preamble, AofCommandReader, AofReadError,
};
