//! Certificates for the TLS tests, made in-process (rcgen): a CA, a server certificate for
//! 127.0.0.1 / localhost and a client certificate it signed, and a second CA with its own
//! server certificate (a client trusting only one of the two CAs, a rotation).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// One CA and what it signed, as PEM files.
pub struct Authority {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Two authorities in a temp dir that lives as long as this.
pub struct Certs {
    _dir: tempfile::TempDir,
    pub main: Authority,
    /// Another CA: a client trusting it refuses `main`'s server, and the other way round.
    pub other: Authority,
}

fn write(dir: &Path, name: &str, pem: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, pem).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    p
}

fn authority(dir: &Path, tag: &str) -> Authority {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.distinguished_name
        .push(DnType::CommonName, format!("Tessera test CA {tag}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");

    let leaf = |names: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(names).expect("params");
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![usage];
        let cert = p.signed_by(&key, &ca_cert, &ca_key).expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        "127.0.0.1",
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) = leaf(
        Vec::new(),
        "tessera test client",
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    Authority {
        ca: write(dir, &format!("ca-{tag}.crt"), &ca_cert.pem()),
        server_cert: write(dir, &format!("server-{tag}.crt"), &server_cert),
        server_key: write(dir, &format!("server-{tag}.key"), &server_key),
        client_cert: write(dir, &format!("client-{tag}.crt"), &client_cert),
        client_key: write(dir, &format!("client-{tag}.key"), &client_key),
    }
}

impl Certs {
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().expect("tempdir");
        let main = authority(dir.path(), "main");
        let other = authority(dir.path(), "other");
        Certs {
            _dir: dir,
            main,
            other,
        }
    }
}

/// Runs the `openssl` command in `dir`; a missing one is a failure that says how to get it.
pub fn openssl(dir: &Path, args: &[&str]) {
    let o = std::process::Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("openssl is needed for this test ({e}): scripts/install-deps.sh installs it")
        });
    assert!(
        o.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// An authority as many guides make one with the `openssl` command: a CA from `req -x509`,
/// and server and client certificates from `x509 -req` with no extension file, which
/// OpenSSL 3.0 writes as X.509 v1 (no extensions, no names but the subject's CN).
fn openssl_v1_authority(dir: &Path, tag: &str) -> Authority {
    let f = |name: &str| format!("{name}-{tag}");
    let ca = f("ca");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "30",
            "-subj",
            &format!("/CN=Tessera v1 test CA {tag}"),
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.crt"),
        ],
    );
    for who in ["server", "client"] {
        let n = f(who);
        openssl(
            dir,
            &[
                "req",
                "-new",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &format!("/CN=tessera v1 {who}"),
                "-keyout",
                &format!("{n}.key"),
                "-out",
                &format!("{n}.csr"),
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-days",
                "30",
                "-in",
                &format!("{n}.csr"),
                "-CA",
                &format!("{ca}.crt"),
                "-CAkey",
                &format!("{ca}.key"),
                "-out",
                &format!("{n}.crt"),
            ],
        );
    }
    Authority {
        ca: dir.join(format!("{ca}.crt")),
        server_cert: dir.join(format!("{}.crt", f("server"))),
        server_key: dir.join(format!("{}.key", f("server"))),
        client_cert: dir.join(format!("{}.crt", f("client"))),
        client_key: dir.join(format!("{}.key", f("client"))),
    }
}

impl Certs {
    /// Two authorities whose server and client certificates are X.509 v1 (see
    /// `openssl_v1_authority`): what OpenSSL accepts and webpki refuses.
    pub fn openssl_v1() -> Certs {
        let dir = tempfile::tempdir().expect("tempdir");
        let main = openssl_v1_authority(dir.path(), "main");
        let other = openssl_v1_authority(dir.path(), "other");
        Certs {
            _dir: dir,
            main,
            other,
        }
    }
}

impl Default for Certs {
    fn default() -> Self {
        Certs::new()
    }
}

impl Authority {
    /// This authority's server key encrypted as PKCS#8 with `pass` (PBES2, AES-256-CBC),
    /// written by the `openssl` command next to the key: the file tls-key-file-pass opens.
    pub fn encrypted_server_key(&self, pass: &str) -> PathBuf {
        self.encrypted_server_key_as(pass, &["-v2", "aes-256-cbc"])
    }

    /// The server key encrypted by `openssl pkcs8 -topk8` with `scheme` (its arguments, such
    /// as `["-v1", "PBE-SHA1-3DES"]`) and `pass`.
    pub fn encrypted_server_key_as(&self, pass: &str, scheme: &[&str]) -> PathBuf {
        let tag: String = scheme
            .iter()
            .flat_map(|a| a.chars())
            .filter(char::is_ascii_alphanumeric)
            .collect();
        let out = self
            .server_key
            .with_extension(format!("{pass}.{tag}.enc.key"));
        let key = self.server_key.display().to_string();
        let o = std::process::Command::new("openssl")
            .args(["pkcs8", "-topk8"])
            .args(scheme)
            .args(["-in", &key])
            .args(["-out", &out.display().to_string(), "-passout"])
            .arg(format!("pass:{pass}"))
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "openssl is needed to encrypt a key ({e}): scripts/install-deps.sh installs it"
                )
            });
        assert!(
            o.status.success(),
            "openssl pkcs8 failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    }

    /// The server's tls-* arguments for a TLS port with this authority's files.
    pub fn server_args(&self, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.server_cert.display().to_string(),
            "--tls-key-file".into(),
            self.server_key.display().to_string(),
            "--tls-ca-cert-file".into(),
            self.ca.display().to_string(),
        ]
    }

    /// redis-cli's / redis-benchmark's arguments for a client of this authority, with its
    /// client certificate or without one.
    pub fn client_args(&self, with_cert: bool) -> Vec<String> {
        let mut v = vec![
            "--tls".into(),
            "--cacert".into(),
            self.ca.display().to_string(),
        ];
        if with_cert {
            v.extend([
                "--cert".into(),
                self.client_cert.display().to_string(),
                "--key".into(),
                self.client_key.display().to_string(),
            ]);
        }
        v
    }
}

/// A server of `bin` serving TLS only (`--port 0 --tls-port P`, as the operator runs node
/// pods) with `a`'s files and `args`, under the kit's process guard, ready when P accepts (the
/// kit's usual readiness check sends a plaintext PING, which such a server cannot answer).
/// Returns the guard, P and the data dir.
pub fn tls_only_server(
    bin: &str,
    a: &Authority,
    args: &[&str],
) -> (crate::Process, u16, tempfile::TempDir) {
    for _ in 0..5 {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = crate::free_port();
        let cmd = crate::Launch::new(bin)
            .verbatim()
            .args(&[
                "--port", "0", "--bind", "{ip}", "--dir", "{dir}", "--save", "",
            ])
            .args(&a.server_args(port))
            .args(args)
            .command("127.0.0.1", port, dir.path());
        let mut node = crate::Process::spawn(cmd);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline && node.try_wait().is_none() {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (node, port, dir);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // Lost the port to another process (or too slow): another port.
    }
    panic!("a TLS-only {bin} did not start");
}

/// A blocking TLS client connection made by a test (rustls), showing `a`'s client
/// certificate and trusting `a`'s CA.
pub struct TlsConn(pub rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>);

impl TlsConn {
    pub fn open(port: u16, a: &Authority) -> TlsConn {
        TlsConn::open_trusting(port, a, &[a])
    }

    /// A connection showing `a`'s client certificate and trusting the CAs of `trust`.
    pub fn open_trusting(port: u16, a: &Authority, trust: &[&Authority]) -> TlsConn {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        for t in trust {
            for c in CertificateDer::pem_file_iter(&t.ca).expect("read CA") {
                roots.add(c.expect("CA pem")).expect("add CA");
            }
        }
        let chain = CertificateDer::pem_file_iter(&a.client_cert)
            .expect("client cert")
            .collect::<Result<Vec<_>, _>>()
            .expect("client cert pem");
        let key = PrivateKeyDer::from_pem_file(&a.client_key).expect("key");
        let cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .expect("client auth");
        let name = ServerName::try_from("127.0.0.1").expect("name");
        let conn =
            rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).expect("client conn");
        let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        TlsConn(rustls::StreamOwned::new(conn, tcp))
    }

    /// The certificate the server showed (after the first command).
    pub fn peer_cert(&self) -> Vec<u8> {
        self.0
            .conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec())
            .unwrap_or_default()
    }

    /// Sends one command and reads its whole reply. Request-response only: the reader is
    /// dropped with the call, so nothing else may be in flight.
    pub fn query(&mut self, args: &[&str]) -> crate::resp::Reply {
        use std::io::Write;
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.0
            .write_all(&crate::resp::encode(&bytes))
            .expect("write a command");
        crate::resp::read_reply(&mut std::io::BufReader::new(&mut self.0))
    }

    /// Sends one inline command and returns its reply's first line (or what the read
    /// said, e.g. a timeout, when none came).
    pub fn cmd(&mut self, line: &str) -> String {
        use std::io::{Read, Write};
        if let Err(e) = self.0.write_all(format!("{line}\r\n").as_bytes()) {
            return format!("write: {e}");
        }
        let mut got = Vec::new();
        let mut b = [0u8; 1];
        while !got.ends_with(b"\r\n") {
            match self.0.read(&mut b) {
                Ok(1) => got.push(b[0]),
                other => return format!("read: {other:?}"),
            }
        }
        String::from_utf8_lossy(&got).trim().to_string()
    }
}
