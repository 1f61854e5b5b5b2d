//! RESP protocol: request parsing and reply writing.
pub mod parser;
pub mod writer;

pub use parser::{recycle_view, Limits, Parser, ProtoError};
pub use writer::{fmt_double, Out};

use bytes::Bytes;

/// Copies borrowed arguments to owned storage, for anything that keeps a command beyond
/// its execution (MULTI queue, blocked client, slowlog, subscriptions): the borrowed form
/// points into the connection's read buffer, which is reused for the next request.
pub fn owned_args(args: &[&[u8]]) -> Vec<Bytes> {
    args.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

/// The borrowed view of owned arguments, to run them through the same handlers.
pub fn arg_view(args: &[Bytes]) -> Vec<&[u8]> {
    args.iter().map(|a| &a[..]).collect()
}
