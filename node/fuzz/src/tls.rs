//! A private key file opened with tls-key-file-pass: OpenSSL's legacy PEM encryption.

use tessera_node::server::tls_legacy_key::open;

/// The first byte is the pass phrase's length (mod 32), then the pass phrase, then the
/// file. Any file and pass phrase: an error or a key, never a panic.
pub fn tls_key(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (pass, pem) = rest.split_at(usize::from(n % 32).min(rest.len()));
    let _ = open(pem, &String::from_utf8_lossy(pass));
}
