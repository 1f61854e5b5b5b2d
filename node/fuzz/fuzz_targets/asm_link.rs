//! cargo-fuzz entry point; the body is [`tessera_node_fuzz::asm_link`] (replayed on stable by
//! tests/corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_node_fuzz::asm_link(data));
