//! RESP protocol: request parsing and reply writing.
pub mod parser;
pub mod writer;

pub use parser::{recycle_view, Limits, Parser, ProtoError};
pub use writer::{fmt_double, Out};
