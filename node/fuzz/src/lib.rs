//! Bodies of tessera-node's fuzz targets.
//!
//! Each `pub fn name(data: &[u8])` is one target: it feeds `data` to a parser the way the
//! node does and asserts what must hold for any input (no panic, and round trips where the
//! node relies on them, e.g. every value RESTORE accepts can be DUMPed and RESTOREd again).
//! `fuzz_targets/<name>.rs` wraps it for cargo-fuzz (`make fuzz`); `tests/corpus.rs`
//! replays `corpus/<name>/*` through the same function on stable, so CI checks every
//! committed input, including the reproducers of crashes fuzzing found.

mod acl;
mod aof;
mod asm;
mod cluster;
mod config;
mod lua;
mod rdb;
mod repl;
mod resp;
mod tls;

pub use acl::acl_file;
pub use aof::{aof_incr, aof_manifest};
pub use asm::asm_link;
pub use cluster::{bus_msg, bus_state, nodes_conf};
pub use config::{config_file, config_set};
pub use lua::lua_convert;
pub use rdb::{hll, rdb_file, rdb_payload};
pub use repl::repl_stream;
pub use resp::request_parser;
pub use tls::{tls_cert, tls_key};

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target by name (the names of the cargo-fuzz binaries and of the corpus folders).
pub const TARGETS: &[(&str, Target)] = &[
    ("request_parser", request_parser),
    ("rdb_payload", rdb_payload),
    ("rdb_file", rdb_file),
    ("hll", hll),
    ("aof_manifest", aof_manifest),
    ("aof_incr", aof_incr),
    ("nodes_conf", nodes_conf),
    ("bus_msg", bus_msg),
    ("bus_state", bus_state),
    ("repl_stream", repl_stream),
    ("config_file", config_file),
    ("config_set", config_set),
    ("lua_convert", lua_convert),
    ("acl_file", acl_file),
    ("tls_key", tls_key),
    ("tls_cert", tls_cert),
    ("asm_link", asm_link),
];

/// Reads fuzz input as a sequence of small choices; runs out gracefully (zeros).
pub(crate) struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Input { data }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub(crate) fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// Up to `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.data.split_at(n.min(self.data.len()));
        self.data = b;
        a
    }
    /// A length-prefixed byte string (one length byte).
    pub(crate) fn short(&mut self) -> &'a [u8] {
        let n = self.u8() as usize;
        self.bytes(n)
    }
}
