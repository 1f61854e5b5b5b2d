//! Certificate checks shared by tessera-node and the operator.
//!
//! Redis verifies its replication and bus peers the way OpenSSL does with no host name set:
//! the chain must reach a trusted CA, the names in the certificate are not looked at. rustls's
//! webpki verifier does the chain and then the name; [`AnyName`] keeps the first half.
//!
//! OpenSSL also takes X.509 v1 certificates, which `openssl x509 -req` still writes when no
//! extension file is given (OpenSSL 3.0). webpki refuses them, so a drop-in for redis-server
//! needs its own path for them: [`legacy`] checks a v1 end-entity certificate (validity,
//! issuer names, signatures up to a trusted CA) with rustls's own signature algorithms. Every
//! v3 certificate still goes through webpki alone.
//!
//! rustls also parses the end-entity certificate when it loads a certificate with its key
//! (to compare the keys) and when it checks a handshake signature; [`certified_key`] and the
//! verifiers' signature methods do both for v1 certificates.

pub mod legacy;
mod verifiers;

pub use legacy::Anchors;
pub use verifiers::{certified_key, AnyName, ClientVerifier, FixedClientCert, FixedServerCert};

/// Whether `der` is a certificate webpki refuses for its version (v1 or v2) and [`legacy`]
/// must check. Unparsable input is not: webpki then reports the error.
pub fn is_legacy(der: &[u8]) -> bool {
    legacy::version(der).is_some_and(|v| v != x509_cert::Version::V3)
}
