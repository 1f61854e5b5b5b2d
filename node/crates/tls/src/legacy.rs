//! The checks webpki does not do because it refuses the certificate's version: an X.509 v1
//! (or v2) end-entity certificate, as OpenSSL accepts it.
//!
//! What is checked, as OpenSSL's default verification does:
//! - every certificate of the path is within its validity period at `now`;
//! - each certificate's issuer name is the subject of the next one, and its signature
//!   verifies with that one's key (rustls's own signature algorithms, the provider's);
//! - the path ends at a trusted CA certificate (`tls-ca-cert-file` / `-dir`, or a
//!   Secret's `ca.crt`), at most [`MAX_INTERMEDIATES`] intermediates away;
//! - an intermediate is a CA: v3 with basicConstraints CA:TRUE, keyCertSign when it has a
//!   keyUsage, and no other critical extension (nothing here could honour one, so such a
//!   path is refused rather than half-checked).
//!
//! A v1 certificate carries no extensions, so there is no key usage or name constraint of the
//! end entity to check. Hand-rolled because no well-kept crate verifies v1 paths (webpki
//! refuses them by design); the signature arithmetic is rustls's, only the walk is here.

use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{
    CertificateDer, SignatureVerificationAlgorithm, SubjectPublicKeyInfoDer, UnixTime,
};
use rustls::{CertificateError, DigitallySignedStruct, Error, PeerMisbehaved};
use x509_cert::der::asn1::AnyRef;
use x509_cert::der::{Decode, Encode, Header, Reader, SliceReader};
use x509_cert::ext::pkix::{BasicConstraints, KeyUsage};
use x509_cert::spki::SubjectPublicKeyInfoOwned;
use x509_cert::{Certificate, Version};

/// Longest path accepted between the end entity and a trusted CA (webpki allows 6 too).
pub const MAX_INTERMEDIATES: usize = 6;

/// Certificates a peer sends besides its own that are looked at.
const MAX_SENT: usize = 10;

/// The trusted CA certificates, parsed once (the same certificates the webpki verifier gets
/// as its root store).
#[derive(Debug, Default, Clone)]
pub struct Anchors {
    certs: Vec<Certificate>,
}

impl Anchors {
    /// Adds a trusted certificate; one that does not parse is left out (webpki's root store
    /// refuses it with the reason).
    pub fn add(&mut self, der: &[u8]) {
        if let Ok(c) = Certificate::from_der(der) {
            self.certs.push(c);
        }
    }

    /// Anchors of every certificate of `certs`.
    pub fn from_certs<'a>(certs: impl IntoIterator<Item = &'a CertificateDer<'a>>) -> Self {
        let mut a = Self::default();
        for c in certs {
            a.add(c.as_ref());
        }
        a
    }

    pub fn is_empty(&self) -> bool {
        self.certs.is_empty()
    }
}

/// A parsed certificate and the exact bytes its signature covers.
struct Parsed<'a> {
    tbs: &'a [u8],
    cert: Certificate,
}

fn bad() -> Error {
    Error::InvalidCertificate(CertificateError::BadEncoding)
}

fn parse(der: &[u8]) -> Result<Parsed<'_>, Error> {
    let cert = Certificate::from_der(der).map_err(|_| bad())?;
    let tbs = tbs_bytes(der).map_err(|_| bad())?;
    Ok(Parsed { tbs, cert })
}

/// The version field of a certificate, when it parses.
pub fn version(der: &[u8]) -> Option<Version> {
    Certificate::from_der(der)
        .ok()
        .map(|c| c.tbs_certificate.version)
}

/// The DER of the TBSCertificate as it was received: the signature covers these bytes, and a
/// re-encoding is not guaranteed to give them back.
fn tbs_bytes(der: &[u8]) -> x509_cert::der::Result<&[u8]> {
    let mut r = SliceReader::new(der)?;
    Header::decode(&mut r)?;
    let start = usize::try_from(r.position())?;
    let _: AnyRef<'_> = r.decode()?;
    let end = usize::try_from(r.position())?;
    Ok(&der[start..end])
}

/// A SEQUENCE's DER without its tag and length: how rustls names algorithms
/// (`AlgorithmIdentifier`'s contents).
fn contents(value: &impl Encode) -> Result<Vec<u8>, Error> {
    let der = value.to_der().map_err(|_| bad())?;
    let mut r = SliceReader::new(&der).map_err(|_| bad())?;
    Header::decode(&mut r).map_err(|_| bad())?;
    let start = usize::try_from(r.position()).map_err(|_| bad())?;
    Ok(der[start..].to_vec())
}

fn valid_at(c: &Certificate, now: UnixTime) -> Result<(), Error> {
    let v = &c.tbs_certificate.validity;
    let now = Duration::from_secs(now.as_secs());
    if now < v.not_before.to_unix_duration() {
        return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
    }
    if now > v.not_after.to_unix_duration() {
        return Err(Error::InvalidCertificate(CertificateError::Expired));
    }
    Ok(())
}

/// The algorithms of the provider that verify signatures `sig_alg` (AlgorithmIdentifier
/// contents) made with a key of `key`'s kind.
fn candidates<'a>(
    algs: &'a [&'a dyn SignatureVerificationAlgorithm],
    key: &'a SubjectPublicKeyInfoOwned,
    sig_alg: Option<&'a [u8]>,
) -> Result<impl Iterator<Item = &'a dyn SignatureVerificationAlgorithm> + 'a, Error> {
    let key_alg = contents(&key.algorithm)?;
    Ok(algs.iter().copied().filter(move |a| {
        a.public_key_alg_id().as_ref() == key_alg.as_slice()
            && sig_alg.is_none_or(|s| a.signature_alg_id().as_ref() == s)
    }))
}

/// Whether `child`'s signature verifies with `key`.
fn signed_by(
    child: &Parsed<'_>,
    key: &SubjectPublicKeyInfoOwned,
    algs: &WebPkiSupportedAlgorithms,
) -> Result<(), Error> {
    let c = &child.cert;
    // RFC 5280 4.1.1.2: the outer algorithm must be the one inside the signed part.
    if c.signature_algorithm != c.tbs_certificate.signature {
        return Err(Error::InvalidCertificate(CertificateError::BadSignature));
    }
    let sig_alg = contents(&c.signature_algorithm)?;
    let (Some(public), Some(sig)) = (key.subject_public_key.as_bytes(), c.signature.as_bytes())
    else {
        return Err(bad());
    };
    let mut any = false;
    for alg in candidates(algs.all, key, Some(&sig_alg))? {
        any = true;
        if alg.verify_signature(public, child.tbs, sig).is_ok() {
            return Ok(());
        }
    }
    Err(Error::InvalidCertificate(if any {
        CertificateError::BadSignature
    } else {
        unsupported(sig_alg, algs.all)
    }))
}

fn unsupported(
    signature_algorithm_id: Vec<u8>,
    algs: &[&dyn SignatureVerificationAlgorithm],
) -> CertificateError {
    CertificateError::UnsupportedSignatureAlgorithmContext {
        signature_algorithm_id,
        supported_algorithms: algs.iter().map(|a| a.signature_alg_id()).collect(),
    }
}

/// Whether an intermediate may issue certificates (see the module doc).
fn is_ca(c: &Certificate) -> bool {
    use x509_cert::der::oid::AssociatedOid;
    let tbs = &c.tbs_certificate;
    if tbs.version != Version::V3 {
        return false;
    }
    let mut ca = false;
    for e in tbs.extensions.iter().flatten() {
        let value = e.extn_value.as_bytes();
        if e.extn_id == BasicConstraints::OID {
            ca = BasicConstraints::from_der(value).is_ok_and(|b| b.ca);
        } else if e.extn_id == KeyUsage::OID {
            if !KeyUsage::from_der(value).is_ok_and(|k| k.key_cert_sign()) {
                return false;
            }
        } else if e.critical {
            return false;
        }
    }
    ca
}

/// Verifies a path from `end_entity` to one of `anchors` (see the module doc).
pub fn verify_chain(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    anchors: &Anchors,
    algs: &WebPkiSupportedAlgorithms,
    now: UnixTime,
) -> Result<(), Error> {
    let ee = parse(end_entity.as_ref())?;
    valid_at(&ee.cert, now)?;
    // Bounded: a peer's chain is hostile input, and each step may try a signature per
    // candidate (webpki bounds its own work the same way).
    let inter: Vec<Parsed<'_>> = intermediates
        .iter()
        .take(MAX_SENT)
        .filter_map(|d| parse(d.as_ref()).ok())
        .filter(|p| is_ca(&p.cert))
        .collect();
    let mut cur = &ee;
    for _ in 0..=MAX_INTERMEDIATES {
        let issuer = &cur.cert.tbs_certificate.issuer;
        let mut err = Error::InvalidCertificate(CertificateError::UnknownIssuer);
        for a in anchors.certs.iter() {
            if a.tbs_certificate.subject != *issuer {
                continue;
            }
            match signed_by(cur, &a.tbs_certificate.subject_public_key_info, algs)
                .and_then(|_| valid_at(a, now))
            {
                Ok(()) => return Ok(()),
                Err(e) => err = e,
            }
        }
        let next = inter.iter().find(|i| {
            i.cert.tbs_certificate.subject == *issuer
                && !std::ptr::eq(*i, cur)
                && signed_by(cur, &i.cert.tbs_certificate.subject_public_key_info, algs).is_ok()
        });
        match next {
            Some(i) => {
                valid_at(&i.cert, now)?;
                cur = i;
            }
            None => return Err(err),
        }
    }
    Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
}

/// The certificate's SubjectPublicKeyInfo, as DER.
pub fn spki_der(cert: &[u8]) -> Result<Vec<u8>, Error> {
    let c = Certificate::from_der(cert).map_err(|_| bad())?;
    c.tbs_certificate
        .subject_public_key_info
        .to_der()
        .map_err(|_| bad())
}

/// A TLS 1.3 handshake signature made with the key of `cert` (a v1 certificate webpki does
/// not parse): rustls's raw-key check with the certificate's key.
pub fn verify_tls13(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algs: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, Error> {
    let spki = SubjectPublicKeyInfoDer::from(spki_der(cert.as_ref())?);
    rustls::crypto::verify_tls13_signature_with_raw_key(message, &spki, dss, algs)
}

/// A TLS 1.2 handshake signature made with the key of `cert`: each of the provider's
/// algorithms for the scheme that takes the certificate's kind of key is tried, as rustls's
/// own TLS 1.2 check does.
pub fn verify_tls12(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algs: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, Error> {
    let c = Certificate::from_der(cert.as_ref()).map_err(|_| bad())?;
    let key = &c.tbs_certificate.subject_public_key_info;
    let Some(public) = key.subject_public_key.as_bytes() else {
        return Err(bad());
    };
    let Some((_, for_scheme)) = algs.mapping.iter().find(|(s, _)| *s == dss.scheme) else {
        return Err(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme.into());
    };
    let mut any = false;
    for alg in candidates(for_scheme, key, None)? {
        any = true;
        if alg
            .verify_signature(public, message, dss.signature())
            .is_ok()
        {
            return Ok(HandshakeSignatureValid::assertion());
        }
    }
    Err(Error::InvalidCertificate(if any {
        CertificateError::BadSignature
    } else {
        unsupported(Vec::new(), for_scheme)
    }))
}
