//! rustls verifiers and certificate resolvers that send v1 certificates to [`legacy`] and
//! every other one to webpki.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, InconsistentKeys,
    RootCertStore, SignatureScheme,
};

use crate::{is_legacy, legacy, Anchors};

/// Verifies a server's chain against the CAs and not its name (see the crate doc); v1
/// certificates through [`legacy`].
#[derive(Debug)]
pub struct AnyName {
    webpki: Arc<WebPkiServerVerifier>,
    v1: V1,
}

/// What both verifiers check themselves rather than through webpki: v1 certificates.
#[derive(Debug)]
struct V1 {
    anchors: Arc<Anchors>,
    algs: WebPkiSupportedAlgorithms,
}

impl V1 {
    /// The chain of a v1 end entity (see [`legacy`]); None for webpki.
    fn chain(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Option<Result<(), Error>> {
        is_legacy(end_entity.as_ref()).then(|| {
            legacy::verify_chain(end_entity, intermediates, &self.anchors, &self.algs, now)
        })
    }

    /// A TLS 1.2 handshake signature by a v1 certificate's key; None for webpki.
    fn tls12(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Option<Result<HandshakeSignatureValid, Error>> {
        is_legacy(cert.as_ref()).then(|| legacy::verify_tls12(message, cert, dss, &self.algs))
    }

    /// A TLS 1.3 handshake signature by a v1 certificate's key; None for webpki.
    fn tls13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Option<Result<HandshakeSignatureValid, Error>> {
        is_legacy(cert.as_ref()).then(|| legacy::verify_tls13(message, cert, dss, &self.algs))
    }
}

impl AnyName {
    /// `roots` and `anchors` hold the same CA certificates.
    pub fn new(
        roots: Arc<RootCertStore>,
        anchors: Arc<Anchors>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, rustls::server::VerifierBuilderError> {
        let algs = provider.signature_verification_algorithms;
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider).build()?;
        Ok(Self {
            webpki,
            v1: V1 { anchors, algs },
        })
    }
}

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if let Some(r) = self.v1.chain(end_entity, intermediates, now) {
            return r.map(|()| ServerCertVerified::assertion());
        }
        // webpki checks the name after the chain: a name error means the chain is good.
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.v1
            .tls12(message, cert, dss)
            .unwrap_or_else(|| self.webpki.verify_tls12_signature(message, cert, dss))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.v1
            .tls13(message, cert, dss)
            .unwrap_or_else(|| self.webpki.verify_tls13_signature(message, cert, dss))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// A server's check of client certificates: webpki's (built by the caller, with its
/// optional/mandatory choice), and [`legacy`] for v1 certificates.
#[derive(Debug)]
pub struct ClientVerifier {
    webpki: Arc<dyn ClientCertVerifier>,
    v1: V1,
}

impl ClientVerifier {
    /// `webpki` was built from the same CA certificates as `anchors`.
    pub fn new(
        webpki: Arc<dyn ClientCertVerifier>,
        anchors: Arc<Anchors>,
        provider: &CryptoProvider,
    ) -> Self {
        Self {
            webpki,
            v1: V1 {
                anchors,
                algs: provider.signature_verification_algorithms,
            },
        }
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if let Some(r) = self.v1.chain(end_entity, intermediates, now) {
            return r.map(|()| ClientCertVerified::assertion());
        }
        self.webpki
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.v1
            .tls12(message, cert, dss)
            .unwrap_or_else(|| self.webpki.verify_tls12_signature(message, cert, dss))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.v1
            .tls13(message, cert, dss)
            .unwrap_or_else(|| self.webpki.verify_tls13_signature(message, cert, dss))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// A certificate chain with its key, the key checked against the certificate as rustls's
/// `with_single_cert` does (OpenSSL's "key values mismatch"), for v1 certificates too.
pub fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, Error> {
    let Some(ee) = chain.first() else {
        return Err(Error::NoCertificatesPresented);
    };
    let legacy_ee = is_legacy(ee.as_ref());
    let ee_spki = legacy_ee
        .then(|| legacy::spki_der(ee.as_ref()))
        .transpose()?;
    let signing = provider.key_provider.load_private_key(key)?;
    let ck = CertifiedKey::new(chain, signing);
    let matched = match ee_spki {
        Some(spki) => match ck.key.public_key() {
            Some(k) if k.as_ref() != spki.as_slice() => Err(InconsistentKeys::KeyMismatch.into()),
            _ => Ok(()),
        },
        None => ck.keys_match(),
    };
    match matched {
        Ok(()) | Err(Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(Arc::new(ck)),
        Err(e) => Err(e),
    }
}

/// The server's one certificate (`ServerConfig::with_cert_resolver`).
#[derive(Debug)]
pub struct FixedServerCert(pub Arc<CertifiedKey>);

impl ResolvesServerCert for FixedServerCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The client certificate shown to servers that ask for one
/// (`ClientConfig::with_client_cert_resolver`).
#[derive(Debug)]
pub struct FixedClientCert(pub Arc<CertifiedKey>);

impl ResolvesClientCert for FixedClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}
