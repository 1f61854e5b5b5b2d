//! RESP protocol: request parsing and reply writing.
pub mod parser;
pub mod writer;

pub use parser::{Limits, Parser, ProtoError};
pub use writer::{fmt_double, Out};
