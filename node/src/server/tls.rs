//! TLS for client connections (`tls-port`), with rustls: the server settings built from
//! the tls-* directives, as Redis 7.0's tlsConfigure, and the encrypted client stream.
//!
//! The stream drives rustls's sans-I/O connection by hand instead of through tokio-rustls:
//! the connection loop (`super::conn`) works on readiness and non-blocking `try_read` /
//! `try_write` calls so that it can parse every complete request of a read and flush
//! its replies once, and tokio-rustls offers only the AsyncRead / AsyncWrite traits. The
//! traits are implemented here too, on top of the same calls (replication and the
//! refusal path use them).

use std::io::{self, BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{
    ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection,
    SupportedCipherSuite,
};
use tessera_tls::{Anchors, AnyName, ClientVerifier, FixedClientCert, FixedServerCert};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::config::Config;

/// Why the tls-* settings do not make a TLS configuration; the texts are Redis's log lines.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TlsError {
    #[error("No tls-cert-file configured!")]
    NoCert,
    #[error("No tls-key-file configured!")]
    NoKey,
    #[error("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!")]
    NoCa,
    #[error("Failed to load certificate: {file}: {reason}")]
    Cert { file: String, reason: String },
    #[error("Failed to load private key: {file}: {reason}")]
    Key { file: String, reason: String },
    #[error("Failed to configure CA certificate(s) file/directory: {0}")]
    Ca(String),
    #[error("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.")]
    Protocols,
    #[error("tls-protocols: tessera-node speaks TLSv1.2 and TLSv1.3 only")]
    OldProtocolsOnly,
    #[error("Failed to configure ciphers: no cipher match in '{0}'")]
    Ciphers(String),
    #[error("Failed to configure ciphersuites: no ciphersuite match in '{0}'")]
    Ciphersuites(String),
    #[error("Failed to configure TLS: {0}")]
    Rustls(String),
}

/// Whether TLS is wanted at all: Redis configures it only then (a node without a TLS
/// port, replication or bus ignores the tls-* files).
pub fn wanted(c: &Config) -> bool {
    c.typed.tls_port != 0 || c.typed.tls_replication || c.typed.tls_cluster
}

/// The server side of TLS as the tls-* directives describe it (Redis's tlsConfigure).
pub fn server_config(c: &Config) -> Result<Arc<ServerConfig>, TlsError> {
    let t = &c.typed;
    if t.tls_cert_file.is_empty() {
        return Err(TlsError::NoCert);
    }
    if t.tls_key_file.is_empty() {
        return Err(TlsError::NoKey);
    }
    let auth = t.tls_auth_clients.as_str();
    let need_ca = auth != "no" || t.tls_replication || t.tls_cluster;
    if need_ca && t.tls_ca_cert_file.is_empty() && t.tls_ca_cert_dir.is_empty() {
        return Err(TlsError::NoCa);
    }
    let chain = load_certs(&t.dir, &t.tls_cert_file)?;
    let key = load_key(&t.dir, &t.tls_key_file, &t.tls_key_file_pass)?;
    // As Redis's tlsConfigure: a client certificate of its own is loaded now, so a bad one
    // stops the start (or refuses the CONFIG SET) rather than the first connection out.
    if !t.tls_client_cert_file.is_empty() && !t.tls_client_key_file.is_empty() {
        load_certs(&t.dir, &t.tls_client_cert_file)?;
        load_key(&t.dir, &t.tls_client_key_file, &t.tls_client_key_file_pass)?;
    }
    let versions = protocols(&t.tls_protocols)?;
    let provider = Arc::new(provider(&t.tls_ciphers, &t.tls_ciphersuites, &versions)?);
    let verifier = if auth == "no" {
        WebPkiClientVerifier::no_client_auth()
    } else {
        let (roots, anchors) = load_roots(&t.dir, &t.tls_ca_cert_file, &t.tls_ca_cert_dir)?;
        let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
        let b = if auth == "optional" {
            b.allow_unauthenticated()
        } else {
            b
        };
        let webpki = b.build().map_err(|e| TlsError::Ca(e.to_string()))?;
        Arc::new(ClientVerifier::new(webpki, Arc::new(anchors), &provider))
    };
    // Our own resolver rather than `with_single_cert`: rustls parses the certificate there
    // to compare the keys and refuses a v1 one (tessera_tls::certified_key compares both).
    let certified =
        tessera_tls::certified_key(chain, key, &provider).map_err(|e| TlsError::Key {
            file: t.tls_key_file.clone(),
            reason: e.to_string(),
        })?;
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Rustls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(FixedServerCert(certified)));
    cfg.ignore_client_order = t.tls_prefer_server_ciphers;
    cfg.session_storage = if t.tls_session_caching {
        ServerSessionMemoryCache::new(t.tls_session_cache_size.max(1) as usize)
    } else {
        Arc::new(NoServerSessionStorage {})
    };
    Ok(Arc::new(cfg))
}

/// The client side, for the connections this node makes (replication with
/// `tls-replication`): the CA of tls-ca-cert-file / -dir verifies the peer, and the
/// certificate shown is tls-client-cert-file / -key-file, else tls-cert-file / -key-file, as
/// Redis. Like Redis (OpenSSL without a host name set), the chain is verified and the peer's
/// host name is not.
pub fn client_config(c: &Config) -> Result<Arc<ClientConfig>, TlsError> {
    let t = &c.typed;
    if t.tls_ca_cert_file.is_empty() && t.tls_ca_cert_dir.is_empty() {
        return Err(TlsError::NoCa);
    }
    let (roots, anchors) = load_roots(&t.dir, &t.tls_ca_cert_file, &t.tls_ca_cert_dir)?;
    let versions = protocols(&t.tls_protocols)?;
    let provider = Arc::new(provider(&t.tls_ciphers, &t.tls_ciphersuites, &versions)?);
    let verifier = AnyName::new(Arc::new(roots), Arc::new(anchors), provider.clone())
        .map_err(|e| TlsError::Ca(e.to_string()))?;
    let b = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Rustls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let (cert, key, pass) = if t.tls_client_cert_file.is_empty() {
        (&t.tls_cert_file, &t.tls_key_file, &t.tls_key_file_pass)
    } else {
        (
            &t.tls_client_cert_file,
            &t.tls_client_key_file,
            &t.tls_client_key_file_pass,
        )
    };
    let cfg = if cert.is_empty() {
        b.with_no_client_auth()
    } else {
        let chain = load_certs(&t.dir, cert)?;
        let key = load_key(&t.dir, key, pass)?;
        let certified = tessera_tls::certified_key(chain, key, &provider)
            .map_err(|e| TlsError::Rustls(e.to_string()))?;
        b.with_client_cert_resolver(Arc::new(FixedClientCert(certified)))
    };
    Ok(Arc::new(cfg))
}

/// [`client_config`] for a client that is not a node (the readiness probe's `--tls-*`
/// flags): the CA file verifies the peer's chain (not its host name), the client
/// certificate and key are shown when given, and every other tls-* setting is Redis's
/// default.
pub fn client_config_from_files(
    ca_file: &str,
    client: Option<(&str, &str)>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let mut c = Config::default();
    let mut set = |name: &str, value: &str| {
        c.set_directive(name, &[value.to_string()])
            .map_err(|e| TlsError::Rustls(format!("{name}: {e}")))
    };
    set("tls-ca-cert-file", ca_file)?;
    if let Some((cert, key)) = client {
        set("tls-client-cert-file", cert)?;
        set("tls-client-key-file", key)?;
    }
    client_config(&c)
}

/// A tls-* file as Redis opens it: a relative path starts from `dir` (Redis has changed
/// directory there; this node never changes directory). Errors name the file as given.
fn in_dir(dir: &Path, file: &str) -> std::path::PathBuf {
    dir.join(file)
}

fn load_certs(dir: &Path, file: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let err = |reason: String| TlsError::Cert {
        file: file.to_string(),
        reason,
    };
    let certs: Vec<_> = CertificateDer::pem_file_iter(in_dir(dir, file))
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no certificate in the file".into()));
    }
    Ok(certs)
}

fn load_key(dir: &Path, file: &str, pass: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    let err = |reason: String| TlsError::Key {
        file: file.to_string(),
        reason,
    };
    let text = std::fs::read(in_dir(dir, file)).map_err(|e| err(e.to_string()))?;
    if memchr::memmem::find(&text, b"-----BEGIN ENCRYPTED PRIVATE KEY-----").is_some() {
        return decrypt_pkcs8(&text, pass).map_err(err);
    }
    if memchr::memmem::find(&text, b"ENCRYPTED").is_some() {
        // OpenSSL's legacy PEM encryption (Proc-Type: 4,ENCRYPTED): see tls_legacy_key.
        if let Some(key) = super::tls_legacy_key::open(&text, pass).map_err(err)? {
            return Ok(key);
        }
    }
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| err(e.to_string()))
}

/// An encrypted PKCS#8 key opened with tls-key-file-pass (OpenSSL asks its password
/// callback for it, which Redis answers with that setting).
fn decrypt_pkcs8(pem: &[u8], pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    use pkcs8::der::pem::PemLabel;
    use pkcs8::der::Decode;
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = std::str::from_utf8(pem).map_err(|_| "the key file is not PEM text".to_string())?;
    // The key's own block (the file may hold more, as OpenSSL allows).
    let block = text
        .find("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        .and_then(|a| text[a..].find(END).map(|z| &text[a..a + z + END.len()]))
        .ok_or_else(|| "no complete ENCRYPTED PRIVATE KEY block".to_string())?;
    let (label, der) =
        pkcs8::der::pem::decode_vec(block.as_bytes()).map_err(|e| format!("bad PEM: {e}"))?;
    if label != pkcs8::EncryptedPrivateKeyInfo::PEM_LABEL {
        return Err(format!("unexpected PEM block '{label}'"));
    }
    if let Some(key) = super::tls_pkcs12_key::open(&der, pass)? {
        return Ok(key);
    }
    let info = pkcs8::EncryptedPrivateKeyInfo::from_der(&der).map_err(|e| e.to_string())?;
    if pass.is_empty() {
        return Err("the key is encrypted and tls-key-file-pass is not set".into());
    }
    let plain = info
        .decrypt(pass)
        .map_err(|e| format!("cannot decrypt it with tls-key-file-pass ({e})"))?;
    Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()))
}

/// The CA certificates of `file` and of every file in `dir` (OpenSSL reads a CApath's
/// hashed names lazily; here every readable PEM file of the directory counts), both
/// relative to `base` (the `dir` setting) when they are relative.
fn load_roots(base: &Path, file: &str, dir: &str) -> Result<(RootCertStore, Anchors), TlsError> {
    let mut roots = RootCertStore::empty();
    let mut anchors = Anchors::default();
    let mut add = |path: &Path, must: bool| -> Result<(), TlsError> {
        let certs = match CertificateDer::pem_file_iter(path) {
            Ok(it) => it.filter_map(Result::ok).collect::<Vec<_>>(),
            Err(e) if must => return Err(TlsError::Ca(format!("{}: {e}", path.display()))),
            Err(_) => return Ok(()),
        };
        if certs.is_empty() && must {
            return Err(TlsError::Ca(format!(
                "{}: no certificate in the file",
                path.display()
            )));
        }
        for c in certs {
            anchors.add(c.as_ref());
            roots
                .add(c)
                .map_err(|e| TlsError::Ca(format!("{}: {e}", path.display())))?;
        }
        Ok(())
    };
    if !file.is_empty() {
        add(&in_dir(base, file), true)?;
    }
    if !dir.is_empty() {
        let entries = std::fs::read_dir(in_dir(base, dir))
            .map_err(|e| TlsError::Ca(format!("{dir}: {e}")))?;
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()) {
                add(&e.path(), false)?;
            }
        }
    }
    if roots.is_empty() {
        return Err(TlsError::Ca("no CA certificate found".into()));
    }
    Ok((roots, anchors))
}

/// tls-protocols: a list of TLSv1, TLSv1.1, TLSv1.2, TLSv1.3 (any case); empty means
/// Redis's default, TLSv1.2 and TLSv1.3. rustls has no TLS 1.0 / 1.1: a list naming only
/// those is refused, and they are dropped from a list that names a newer one too.
fn protocols(v: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, TlsError> {
    let mut out = Vec::new();
    let mut any = false;
    for w in v.split_whitespace() {
        any = true;
        match w.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => {}
            "tlsv1.2" => out.push(&rustls::version::TLS12),
            "tlsv1.3" => out.push(&rustls::version::TLS13),
            _ => return Err(TlsError::Protocols),
        }
    }
    if !any {
        return Ok(vec![&rustls::version::TLS12, &rustls::version::TLS13]);
    }
    if out.is_empty() {
        return Err(TlsError::OldProtocolsOnly);
    }
    Ok(out)
}

/// OpenSSL's name for a rustls suite: TLS 1.3 names as `tls-ciphersuites` takes them,
/// TLS 1.2 ones as `tls-ciphers` does.
fn openssl_name(s: &SupportedCipherSuite) -> Option<&'static str> {
    use rustls::CipherSuite as C;
    Some(match s.suite() {
        C::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        C::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        C::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-ECDSA-CHACHA20-POLY1305",
        C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        _ => return None,
    })
}

/// ring's suites, narrowed by tls-ciphers (TLS 1.2, an OpenSSL cipher list: `:`, `,` or
/// space separated; `!x` / `-x` removes a name; a keyword such as DEFAULT or HIGH keeps
/// every suite, as all of rustls's are "HIGH") and tls-ciphersuites (TLS 1.3 names). As
/// OpenSSL, names it does not know are skipped, and a list matching nothing is refused.
fn provider(
    ciphers: &str,
    ciphersuites: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<CryptoProvider, TlsError> {
    let mut p = rustls::crypto::ring::default_provider();
    let is13 = |s: &SupportedCipherSuite| matches!(s, SupportedCipherSuite::Tls13(_));
    let pick = |list: &str, tls13: bool| -> Option<Vec<&'static str>> {
        if list.trim().is_empty() {
            return None;
        }
        let mut keep: Vec<&'static str> = Vec::new();
        let mut drop: Vec<String> = Vec::new();
        for w in list.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
            if let Some(n) = w.strip_prefix(['!', '-']) {
                drop.push(n.to_ascii_uppercase());
                continue;
            }
            let w = w.strip_prefix('+').unwrap_or(w).to_ascii_uppercase();
            for s in p.cipher_suites.iter().filter(|s| is13(s) == tls13) {
                let Some(name) = openssl_name(s) else {
                    continue;
                };
                let keyword = !tls13 && is_keyword_for(&w, name);
                if (name == w || keyword) && !keep.contains(&name) {
                    keep.push(name);
                }
            }
        }
        keep.retain(|n| {
            !drop
                .iter()
                .any(|d| d == n || (!tls13 && is_keyword_for(d, n)))
        });
        Some(keep)
    };
    let keep12 = pick(ciphers, false);
    let keep13 = pick(ciphersuites, true);
    let want12 = versions
        .iter()
        .any(|v| v.version == rustls::ProtocolVersion::TLSv1_2);
    let want13 = versions
        .iter()
        .any(|v| v.version == rustls::ProtocolVersion::TLSv1_3);
    if want12 && keep12.as_ref().is_some_and(Vec::is_empty) {
        return Err(TlsError::Ciphers(ciphers.to_string()));
    }
    if want13 && keep13.as_ref().is_some_and(Vec::is_empty) {
        return Err(TlsError::Ciphersuites(ciphersuites.to_string()));
    }
    p.cipher_suites.retain(|s| {
        let list = if is13(s) { &keep13 } else { &keep12 };
        match (list, openssl_name(s)) {
            (None, _) => true,
            (Some(l), Some(n)) => l.contains(&n),
            (Some(_), None) => false,
        }
    });
    Ok(p)
}

/// An OpenSSL cipher-list keyword `w` that selects the TLS 1.2 suite `name` (rustls's are
/// all ECDHE with AEAD ciphers: strong, forward secret).
fn is_keyword_for(w: &str, name: &str) -> bool {
    match w {
        "DEFAULT" | "ALL" | "HIGH" | "ECDHE" | "EECDH" | "KECDHE" | "AEAD" | "TLSV1.2"
        | "SECURE" => true,
        "ECDSA" | "AECDSA" => name.contains("ECDSA"),
        "RSA" | "ARSA" => name.contains("-RSA-"),
        "AESGCM" | "AES" => name.contains("GCM"),
        "AES128" => name.contains("AES128"),
        "AES256" => name.contains("AES256"),
        "CHACHA20" => name.contains("CHACHA20"),
        _ => false,
    }
}

/// A TLS connection (a client's, or one this node made): the TCP socket and rustls's state
/// for it. The state sits behind a lock only so that the stream stays `Sync` (the
/// connection loop waits on readable and writable at once through shared references); one
/// task uses it.
pub struct TlsStream {
    tcp: tokio::net::TcpStream,
    tls: parking_lot::Mutex<Connection>,
}

/// `io::Read` / `io::Write` straight on a non-blocking socket, for the busy-script hook
/// (see [`TlsStream::answer_parked`]).
struct RawIo(std::os::fd::RawFd);

impl Read for RawIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for its length; the fd is the stream's live socket.
        let n = unsafe {
            libc::recv(
                self.0,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl Write for RawIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for its length; the fd is the stream's live socket.
        let n = unsafe {
            libc::send(
                self.0,
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `io::Read` / `io::Write` over the non-blocking socket, for rustls's read_tls/write_tls.
struct TryIo<'a>(&'a tokio::net::TcpStream);

impl Read for TryIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for TryIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn tls_failed(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsStream {
    /// The server side of a connection a client made to a TLS port.
    pub fn new(tcp: tokio::net::TcpStream, cfg: Arc<ServerConfig>) -> io::Result<Self> {
        let conn = ServerConnection::new(cfg).map_err(tls_failed)?;
        Ok(TlsStream {
            tcp,
            tls: parking_lot::Mutex::new(conn.into()),
        })
    }

    /// The client side of a connection this node made to `host` (its hello is sent with
    /// the first write or read).
    pub fn connect(
        tcp: tokio::net::TcpStream,
        cfg: Arc<ClientConfig>,
        host: &str,
    ) -> io::Result<Self> {
        // Not checked (see `client_config`), but sent as SNI when it is a DNS name.
        let name = ServerName::try_from(host.to_string())
            .unwrap_or_else(|_| ServerName::try_from("localhost").expect("a valid DNS name"));
        let conn = ClientConnection::new(cfg, name).map_err(tls_failed)?;
        Ok(TlsStream {
            tcp,
            tls: parking_lot::Mutex::new(conn.into()),
        })
    }

    pub fn tcp(&self) -> &tokio::net::TcpStream {
        &self.tcp
    }

    /// Sends what rustls has encrypted; WouldBlock when the socket takes no more of it.
    fn send_pending(&self, conn: &mut Connection) -> io::Result<()> {
        while conn.wants_write() {
            conn.write_tls(&mut TryIo(&self.tcp))?;
        }
        Ok(())
    }

    /// Reads and decrypts what the socket has: Ok(false) at the end of the stream.
    fn receive(&self, conn: &mut Connection) -> io::Result<bool> {
        if conn.read_tls(&mut TryIo(&self.tcp))? == 0 {
            return Ok(false);
        }
        if let Err(e) = conn.process_new_packets() {
            if conn.is_handshaking() && matches!(conn, Connection::Server(_)) {
                // Redis's words, and a warning as there: a client that cannot connect.
                tracing::warn!("Error accepting a client connection: {e}");
            }
            // The alert saying why goes to the peer if the socket takes it, unless what came
            // was no TLS record at all (a plaintext client on a TLS port): OpenSSL, so
            // Redis, then just closes ("doesn't look like TLS - don't send an alert"), and
            // the client sees the connection end rather than a stray alert byte.
            let not_tls = conn.is_handshaking()
                && matches!(
                    e,
                    rustls::Error::InvalidMessage(
                        rustls::InvalidMessage::InvalidContentType
                            | rustls::InvalidMessage::UnknownProtocolVersion
                    )
                );
            if not_tls {
                // OpenSSL stops reading there, so Redis closes with the rest of the request
                // unread and the kernel answers with a reset: the same for the client here.
                let _ =
                    socket2::SockRef::from(&self.tcp).set_linger(Some(std::time::Duration::ZERO));
            } else {
                let _ = self.send_pending(conn);
            }
            return Err(tls_failed(e));
        }
        // Handshake messages and alerts go out as soon as they are made; a full socket
        // keeps them for `readable` / the next write.
        match self.send_pending(conn) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(true),
        }
    }

    /// Ready when a read may find data: decrypted bytes already waiting, or the socket
    /// readable. Encrypted bytes still to send (handshake, alerts, the tail of a reply)
    /// go out first: the peer waits for them before it sends more.
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let pending = {
                let mut conn = self.tls.lock();
                let st = conn.process_new_packets().map_err(tls_failed)?;
                if st.plaintext_bytes_to_read() > 0 || st.peer_has_closed() {
                    return Poll::Ready(Ok(()));
                }
                match self.send_pending(&mut conn) {
                    Ok(()) => false,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            };
            if pending {
                // The socket's write readiness was cleared by the write that would block.
                ready!(self.tcp.poll_write_ready(cx))?;
                continue;
            }
            return self.tcp.poll_read_ready(cx);
        }
    }

    pub fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tcp.poll_write_ready(cx)
    }

    /// Decrypted bytes into `dst`, without waiting: Ok(0) when the peer closed.
    pub fn try_read(&self, dst: &mut [u8]) -> io::Result<usize> {
        let mut conn = self.tls.lock();
        loop {
            match conn.reader().read(dst) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify: the end, as on a plain socket.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if !self.receive(&mut conn)? {
                return Ok(0);
            }
        }
    }

    /// Takes what it can of `buf` into the TLS stream and sends it; WouldBlock when
    /// earlier encrypted bytes still wait for the socket.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        let mut conn = self.tls.lock();
        self.send_pending(&mut conn)?;
        let n = conn.writer().write(buf)?;
        match self.send_pending(&mut conn) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ if n == 0 && !buf.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            _ => Ok(n),
        }
    }

    /// Sends every pending encrypted byte, reading the handshake to its end if needed (a
    /// reply written before it sits in rustls until it is).
    fn poll_send_all(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut conn = self.tls.lock();
            let wait_for_write = if conn.wants_write() {
                match self.send_pending(&mut conn) {
                    Ok(()) => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            } else if conn.is_handshaking() {
                match self.receive(&mut conn) {
                    Ok(true) => continue,
                    Ok(false) => return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into())),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            } else {
                return Poll::Ready(Ok(()));
            };
            drop(conn);
            if wait_for_write {
                ready!(self.tcp.poll_write_ready(cx))?;
            } else {
                ready!(self.tcp.poll_read_ready(cx))?;
            }
        }
    }
}

/// What [`TlsStream::answer_parked`] did.
pub enum Parked {
    /// Nothing (no complete request decrypted, or the connection is not in a state to be
    /// answered from outside its task).
    Nothing,
    /// Requests answered and their replies sent.
    Answered,
    /// The replies could not be sent whole, or the stream failed: the connection must end.
    Broken,
}

impl TlsStream {
    /// Answers requests of a connection whose task is parked while a script holds its
    /// thread (crate::server::busy_io): decrypts what the socket has, hands the first
    /// plaintext chunk to `answer`, which returns how many bytes it answered and the replies,
    /// consumes those bytes (the rest stays decrypted for the task), encrypts and sends the
    /// replies. Skipped mid-handshake or with encrypted bytes still queued.
    pub fn answer_parked(&self, answer: impl FnOnce(&[u8]) -> (usize, Vec<u8>)) -> Parked {
        let Some(mut conn) = self.tls.try_lock() else {
            return Parked::Nothing;
        };
        if conn.is_handshaking() || conn.wants_write() {
            return Parked::Nothing;
        }
        // Straight on the socket: tokio's try_read would trust readiness its reactor, on this
        // very thread, cannot update while the script runs. A few records at most per round
        // (the hook comes back every few milliseconds).
        let mut raw = RawIo(self.tcp.as_raw_fd());
        for _ in 0..4 {
            match conn.read_tls(&mut raw) {
                Ok(0) => break,
                Ok(_) => {
                    if conn.process_new_packets().is_err() {
                        return Parked::Broken;
                    }
                }
                // Nothing more now: the task sees the rest (or the end) when it runs.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return Parked::Broken,
            }
        }
        let (used, reply) = match conn.reader().fill_buf() {
            Ok(chunk) if !chunk.is_empty() => answer(chunk),
            _ => return Parked::Nothing,
        };
        if used == 0 {
            return Parked::Nothing;
        }
        conn.reader().consume(used);
        if !reply.is_empty() {
            match conn.writer().write(&reply) {
                Ok(n) if n == reply.len() => {}
                _ => return Parked::Broken,
            }
            while conn.wants_write() {
                match conn.write_tls(&mut raw) {
                    Ok(n) if n > 0 => {}
                    _ => return Parked::Broken,
                }
            }
        }
        Parked::Answered
    }

    /// [`AsyncRead::poll_read`] through a shared reference: a client's stream is shared with
    /// the busy-script hook (crate::server::busy_io).
    pub fn poll_read_shared(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self;
        loop {
            match this.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            // Encrypted bytes the peer waits for go out before waiting to read.
            if this.tls.lock().wants_write() {
                ready!(this.poll_send_all(cx))?;
                continue;
            }
            ready!(this.tcp.poll_read_ready(cx))?;
        }
    }

    /// [`AsyncWrite::poll_write`] through a shared reference.
    pub fn poll_write_shared(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            match self.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.tcp.poll_write_ready(cx))?;
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// [`AsyncWrite::poll_flush`] through a shared reference.
    pub fn poll_flush_shared(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_send_all(cx)
    }

    /// [`AsyncWrite::poll_shutdown`] through a shared reference: close_notify, then the
    /// socket's write side.
    pub fn poll_shutdown_shared(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tls.lock().send_close_notify();
        ready!(self.poll_send_all(cx))?;
        Poll::Ready(socket2::SockRef::from(&self.tcp).shutdown(std::net::Shutdown::Write))
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().poll_read_shared(cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_shared(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_send_all(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_shutdown_shared(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_as_redis_names_them() {
        assert_eq!(protocols("").map(|v| v.len()), Ok(2));
        assert_eq!(protocols("TLSv1.2").map(|v| v.len()), Ok(1));
        assert_eq!(protocols("tlsv1.3 TLSv1.1").map(|v| v.len()), Ok(1));
        assert_eq!(protocols("TLSv1 TLSv1.1"), Err(TlsError::OldProtocolsOnly));
        assert_eq!(protocols("SSLv3"), Err(TlsError::Protocols));
    }

    #[test]
    fn cipher_lists_narrow_the_suites() {
        let all = rustls::crypto::ring::default_provider().cipher_suites.len();
        let v = [&rustls::version::TLS12, &rustls::version::TLS13];
        let n = |c: &str, cs: &str| provider(c, cs, &v).map(|p| p.cipher_suites.len());
        assert_eq!(n("", ""), Ok(all));
        assert_eq!(n("DEFAULT:!MEDIUM", ""), Ok(all));
        assert_eq!(
            n("ECDHE-RSA-AES256-GCM-SHA384", "TLS_AES_128_GCM_SHA256"),
            Ok(2)
        );
        assert_eq!(n("HIGH:!ECDSA", "").map(|k| k < all), Ok(true));
        assert!(matches!(n("RC4-MD5", ""), Err(TlsError::Ciphers(_))));
        assert!(matches!(n("", "TLS_FOO"), Err(TlsError::Ciphersuites(_))));
        // A list for a protocol that is off is not checked.
        let only13 = [&rustls::version::TLS13];
        assert!(provider("RC4-MD5", "", &only13).is_ok());
    }

    #[test]
    fn files_are_required_and_named_in_errors() {
        let mut c = Config::default();
        assert_eq!(server_config(&c).err(), Some(TlsError::NoCert));
        c.set_directive("tls-cert-file", &["/nonexistent/c.crt".into()])
            .unwrap();
        assert_eq!(server_config(&c).err(), Some(TlsError::NoKey));
        c.set_directive("tls-key-file", &["/nonexistent/c.key".into()])
            .unwrap();
        assert_eq!(server_config(&c).err(), Some(TlsError::NoCa));
        c.set_directive("tls-auth-clients", &["no".into()]).unwrap();
        assert!(matches!(
            server_config(&c).err(),
            Some(TlsError::Cert { file, .. }) if file == "/nonexistent/c.crt"
        ));
    }
}
