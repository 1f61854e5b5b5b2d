//! What a TLS peer or a key file can feed the node: a private key file opened with
//! tls-key-file-pass (OpenSSL's legacy PEM encryption, PKCS#12's 3DES schemes), and a
//! certificate a peer presents (the X.509 v1 path of tessera-tls).

use rustls::pki_types::{CertificateDer, UnixTime};
use tessera_node::server::{tls_legacy_key, tls_pkcs12_key};
use tessera_tls::{is_legacy, legacy, Anchors};

/// The first byte is the pass phrase's length (mod 32), then the pass phrase, then the
/// file. Any file and pass phrase: an error or a key, never a panic.
pub fn tls_key(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (pass, file) = rest.split_at(usize::from(n % 32).min(rest.len()));
    let pass = String::from_utf8_lossy(pass);
    let _ = tls_legacy_key::open(file, &pass);
    let _ = tls_pkcs12_key::open(file, &pass);
}

/// A peer's certificate (the whole input), also sent as its own intermediate and trusted
/// as its own CA, so that a parsable input walks the whole v1 path: an error or a pass,
/// never a panic.
pub fn tls_cert(data: &[u8]) {
    let cert = CertificateDer::from(data);
    let _ = is_legacy(data);
    let anchors = Anchors::from_certs([&cert]);
    let algs = rustls::crypto::ring::default_provider().signature_verification_algorithms;
    let now = UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_800_000_000));
    let _ = legacy::verify_chain(&cert, std::slice::from_ref(&cert), &anchors, &algs, now);
    let _ = legacy::verify_chain(&cert, &[], &Anchors::default(), &algs, now);
    let _ = legacy::spki_der(data);
}
