//! TLS for the engine's connections to nodes that serve clients on TLS only (a RedisCluster
//! with `spec.tls`): the CA their certificates chain to, and the certificate the operator
//! presents to nodes that want one (`tls-auth-clients yes`).
//!
//! Nodes are reached by pod IP and their certificates name pods by DNS, so the chain is
//! verified against the CA and the name is not: what Redis itself does on its replication and
//! bus links, and what `redis-cli --tls --cacert` does.

use std::sync::Arc;
use std::time::Duration;

use tessera_tls::{Anchors, AnyName, FixedClientCert};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::TopologyError;

/// The PEM material of the operator's TLS connections (from the cluster's TLS Secret).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct TlsClient {
    /// CA certificates (PEM) the nodes' certificates must chain to.
    pub ca_pem: Vec<u8>,
    /// The certificate chain (PEM) presented to nodes that ask for one.
    pub cert_pem: Vec<u8>,
    /// Its private key (PEM).
    pub key_pem: Vec<u8>,
}

/// The key stays out of logs.
impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("ca_pem", &self.ca_pem.len())
            .field("cert_pem", &self.cert_pem.len())
            .finish_non_exhaustive()
    }
}

fn bad(what: &str, e: impl std::fmt::Display) -> TopologyError {
    TopologyError::Invalid(format!("TLS {what}: {e}"))
}

/// The certificates of a PEM text, in order; none is an error.
pub fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TopologyError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("certificate", e))?;
    if certs.is_empty() {
        return Err(bad("certificate", "no certificate in the PEM text"));
    }
    Ok(certs)
}

impl TlsClient {
    /// A rustls client configuration: the CA as the only root, the certificate as client
    /// certificate, names not checked (see the module doc).
    pub fn client_config(&self) -> Result<ClientConfig, TopologyError> {
        let cas = certificates(&self.ca_pem)?;
        let mut roots = RootCertStore::empty();
        for ca in &cas {
            roots.add(ca.clone()).map_err(|e| bad("CA", e))?;
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let verifier = AnyName::new(
            Arc::new(roots),
            Arc::new(Anchors::from_certs(&cas)),
            provider.clone(),
        )
        .map_err(|e| bad("CA", e))?;
        let chain = certificates(&self.cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem).map_err(|e| bad("key", e))?;
        let certified = tessera_tls::certified_key(chain, key, &provider)
            .map_err(|e| bad("client certificate", e))?;
        Ok(ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("protocols", e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_client_cert_resolver(Arc::new(FixedClientCert(certified))))
    }
}

/// The leaf certificate (DER) `host:port` serves to a new TLS connection: after a
/// certificate reload, whether the node serves the new one. Bounded by `timeout`.
pub async fn served_certificate(
    host: &str,
    port: u16,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<Vec<u8>, TopologyError> {
    let addr = format!("{host}:{port}");
    let io = |e: std::io::Error| TopologyError::Protocol(format!("{addr}: TLS handshake: {e}"));
    let connector = TlsConnector::from(Arc::new(tls.client_config()?));
    // Any valid name: the verifier ignores it.
    let name = ServerName::try_from(host.to_string())
        .unwrap_or_else(|_| ServerName::try_from("node").expect("static name is valid"));
    let handshake = async {
        let tcp = TcpStream::connect(&addr).await.map_err(io)?;
        let stream = connector.connect(name, tcp).await.map_err(io)?;
        let (_, conn) = stream.get_ref();
        conn.peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec())
            .ok_or_else(|| TopologyError::Protocol(format!("{addr}: no certificate served")))
    };
    tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| TopologyError::Protocol(format!("{addr}: TLS handshake timed out")))?
}
