//! TLS for clients (issue 20), against redis-server 7.0.15 with the same certificates:
//! redis-cli --tls with and without a client certificate, a client trusting another CA,
//! a plaintext client on the TLS port, CONFIG SET of the tls-* settings (a bad file
//! refused, certificates reloaded while a connection made before goes on, tls-port
//! moved and closed), the startup errors, and redis-benchmark --tls.

use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use tessera_testkit::cli::cli_out;
use tessera_testkit::tls::{Authority, Certs, TlsConn};
use tessera_testkit::*;

/// redis-cli against `port` with `tls` arguments: whether it exited 0, and what it
/// printed (stdout then stderr, trimmed; the port written as P).
fn cli(port: u16, tls: &[String], args: &[&str]) -> (bool, String) {
    let p = port.to_string();
    let mut conn: Vec<&str> = vec!["-h", "127.0.0.1", "-p", &p];
    conn.extend(tls.iter().map(String::as_str));
    let o = cli_out(&conn, args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text.trim().replace(&p, "P"))
}

fn note(out: &mut Vec<String>, what: &str, r: (bool, String)) {
    out.push(format!("{what}: {r:?}"));
}

/// What one server does with TLS clients; compared whole between the two servers.
fn tls_story(s: &Server, tls_port: u16, c: &Certs) -> Vec<String> {
    let (m, o) = (&c.main, &c.other);
    let mut out = Vec::new();
    note(
        &mut out,
        "set",
        cli(tls_port, &m.client_args(true), &["SET", "k", "v"]),
    );
    note(
        &mut out,
        "get",
        cli(tls_port, &m.client_args(true), &["GET", "k"]),
    );
    // tls-auth-clients yes (the default): no client certificate, no connection.
    let (ok, _) = cli(tls_port, &m.client_args(false), &["PING"]);
    note(&mut out, "no client cert", (ok, String::new()));
    note(
        &mut out,
        "other CA",
        cli(tls_port, &o.client_args(true), &["PING"]),
    );
    // No TLS alert comes back (a plaintext client would read it as a reply), the
    // connection is reset.
    note(
        &mut out,
        "plaintext on the TLS port",
        cli(tls_port, &[], &["PING"]),
    );
    note(
        &mut out,
        "plain port still plain",
        cli(s.port, &[], &["PING"]),
    );
    let mut kept = TlsConn::open(tls_port, m);
    out.push(format!("own TLS conn: {}", kept.cmd("PING")));
    let admin = m.client_args(true);
    let set = |args: &[&str]| {
        let mut a = vec!["CONFIG", "SET"];
        a.extend_from_slice(args);
        cli(tls_port, &admin, &a)
    };
    out.push(format!(
        "optional: {:?}",
        set(&["tls-auth-clients", "optional"])
    ));
    note(
        &mut out,
        "no client cert, optional",
        cli(tls_port, &m.client_args(false), &["PING"]),
    );
    out.push(format!(
        "missing cert file: {:?}",
        set(&["tls-cert-file", "/nonexistent/server.crt"])
    ));
    out.push(format!(
        "bad protocols: {:?}",
        set(&["tls-protocols", "SSLv3"])
    ));
    // Rotation: the other CA's server certificate; new clients must trust that CA, the
    // connection made before goes on.
    out.push(format!(
        "rotate: {:?}",
        set(&[
            "tls-cert-file",
            &o.server_cert.display().to_string(),
            "tls-key-file",
            &o.server_key.display().to_string(),
        ])
    ));
    let (ok, _) = cli(tls_port, &m.client_args(true), &["PING"]);
    note(&mut out, "old CA after rotation", (ok, String::new()));
    note(
        &mut out,
        "new CA after rotation",
        cli(tls_port, &o.client_args(false), &["PING"]),
    );
    out.push(format!("own TLS conn after rotation: {}", kept.cmd("PING")));
    // The TLS port moves, then closes; the plain port stays.
    let moved = free_port();
    let plain_set = |args: &[&str]| {
        let mut a = vec!["CONFIG", "SET"];
        a.extend_from_slice(args);
        cli(s.port, &[], &a)
    };
    out.push(format!(
        "move tls-port: {:?}",
        plain_set(&["tls-port", &moved.to_string()])
    ));
    let (ok, _) = cli(tls_port, &o.client_args(false), &["PING"]);
    note(&mut out, "old TLS port", (ok, String::new()));
    let (ok, text) = cli(moved, &o.client_args(false), &["PING"]);
    note(
        &mut out,
        "new TLS port",
        (ok, text.replace(&moved.to_string(), "M")),
    );
    out.push(format!("tls-port 0: {:?}", plain_set(&["tls-port", "0"])));
    let (ok, _) = cli(moved, &o.client_args(false), &["PING"]);
    note(&mut out, "TLS port closed", (ok, String::new()));
    out.push(format!("own TLS conn at the end: {}", kept.cmd("PING")));
    out
}

#[test]
fn tls_clients_like_redis() {
    let certs = Certs::new();
    let mut stories = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let tls_port = free_port();
        let s = l
            .args(&["--save", ""])
            .args(&certs.main.server_args(tls_port))
            .start();
        stories.push(tls_story(&s, tls_port, &certs));
    }
    assert_eq!(
        stories[1], stories[0],
        "tessera (left) vs redis-server (right)"
    );
}

/// The startup errors: TLS asked for without its files stops both servers with Redis's
/// log lines.
#[test]
fn tls_startup_errors_like_redis() {
    let certs = Certs::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let missing_key = dir.path().join("missing.key").display().to_string();
    // `--tls-port <free>` followed by the given settings.
    let with = |opts: &[(&str, String)]| {
        let mut v = vec!["--tls-port".to_string(), free_port().to_string()];
        for (name, value) in opts {
            v.extend([format!("--{name}"), value.clone()]);
        }
        v
    };
    let (cert, key, ca) = (
        certs.main.server_cert.display().to_string(),
        certs.main.server_key.display().to_string(),
        certs.main.ca.display().to_string(),
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (with(&[]), "No tls-cert-file configured!"),
        (
            with(&[
                ("tls-cert-file", cert.clone()),
                ("tls-key-file", missing_key),
                ("tls-ca-cert-file", ca),
            ]),
            "Failed to load private key: ",
        ),
        (
            with(&[("tls-cert-file", cert), ("tls-key-file", key)]),
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified",
        ),
    ];
    for (args, want) in cases {
        for l in [Launch::redis(), Launch::tessera()] {
            let bin = l.bin().to_string();
            let exit = l
                .args(&["--save", ""])
                .args(&args)
                .run_to_exit(dir.path(), Duration::from_secs(20));
            assert!(
                exit.failed(),
                "{bin} {args:?} did not fail:\n{}",
                exit.output
            );
            for line in [want, "Failed to configure TLS. Check logs for more info."] {
                assert!(
                    exit.output.contains(line),
                    "{bin} {args:?}: no {line:?} in:\n{}",
                    exit.output
                );
            }
        }
    }
}

/// Each server started with `enc` as tls-key-file: with `good` as tls-key-file-pass, what a
/// redis-cli --tls PING gets; then, for each of `bad` (None: no pass phrase), whether the
/// start is refused naming the key. `what` labels failure messages.
fn key_pass_outcomes(
    m: &Authority,
    enc: &str,
    good: &str,
    bad: &[Option<&str>],
    what: &str,
) -> Vec<((bool, String), Vec<bool>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = |pass: Option<&str>| {
        let mut v = m.server_args(free_port());
        let i = v
            .iter()
            .position(|a| a == "--tls-key-file")
            .expect("key arg")
            + 1;
        v[i] = enc.to_string();
        if let Some(p) = pass {
            v.extend(["--tls-key-file-pass".to_string(), p.to_string()]);
        }
        v
    };
    let mut outcomes = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let bin = l.bin().to_string();
        let a = args(Some(good));
        let tls_port: u16 = a[1].parse().expect("port");
        let s = Launch::new(&bin).args(&["--save", ""]).args(&a).start();
        let served = cli(tls_port, &m.client_args(true), &["PING"]);
        drop(s);
        let mut refused = Vec::new();
        for pass in bad {
            let exit = Launch::new(&bin)
                .args(&["--save", ""])
                .args(&args(*pass))
                .run_to_exit(dir.path(), Duration::from_secs(20));
            refused.push(
                exit.failed()
                    && exit.output.contains("Failed to load private key: ")
                    && exit.output.contains("Failed to configure TLS."),
            );
            assert!(
                refused[refused.len() - 1],
                "{bin} {what} {pass:?}:\n{}",
                exit.output
            );
        }
        outcomes.push((served, refused));
    }
    outcomes
}

/// tls-key-file-pass: a server key encrypted as PKCS#8 loads with its password (redis-cli
/// --tls is then served), and stops the server without it or with a wrong one, on both
/// servers.
#[test]
fn encrypted_key_with_tls_key_file_pass_like_redis() {
    let certs = Certs::new();
    let m = &certs.main;
    let enc = m.encrypted_server_key("s3cret").display().to_string();
    let outcomes = key_pass_outcomes(m, &enc, "s3cret", &[None, Some("wrong")], "PKCS#8");
    assert_eq!(outcomes[0], ((true, "PONG".to_string()), vec![true, true]));
    assert_eq!(outcomes[1], outcomes[0], "tessera / redis");
}

/// redis-benchmark --tls runs clean against tessera-node (every request answered).
#[test]
fn redis_benchmark_over_tls() {
    let certs = Certs::new();
    let tls_port = free_port();
    let s = Launch::tessera()
        .args(&["--save", ""])
        .args(&certs.main.server_args(tls_port))
        .start();
    let bench = tessera_testkit::bins::tool("redis-benchmark");
    let p = tls_port.to_string();
    let mut cmd = std::process::Command::new(&bench);
    cmd.args([
        "-h",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "set,get",
        "-n",
        "20000",
        "-P",
        "16",
    ])
    .args(["-c", "8", "-q", "--csv"])
    .args(certs.main.client_args(true));
    let o = output_within(&mut cmd, Duration::from_secs(120));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{bench}: {text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for t in ["\"SET\"", "\"GET\""] {
        assert!(text.contains(t), "no {t} line in:\n{text}");
    }
    let keys = s.resp().cmd(&["DBSIZE"]);
    assert_eq!(keys, Reply::Int(1), "redis-benchmark's one key");
}

/// A redis-server replica with `tls-replication yes` syncs from tessera-node's TLS port
/// (the full sync, then the stream), authenticating with its client certificate.
#[test]
fn redis_replica_syncs_over_tls() {
    redis_replica_sync(&Certs::new().main);
}

fn redis_replica_sync(m: &Authority) {
    let tls_port = free_port();
    let master = Launch::tessera()
        .args(&["--save", ""])
        .args(&m.server_args(tls_port))
        .start();
    let mut w = master.resp();
    for i in 0..100 {
        w.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    let replica = Launch::redis()
        .args(&[
            "--save",
            "",
            "--replicaof",
            "127.0.0.1",
            &tls_port.to_string(),
            "--tls-replication",
            "yes",
            "--tls-cert-file",
            &m.client_cert.display().to_string(),
            "--tls-key-file",
            &m.client_key.display().to_string(),
            "--tls-ca-cert-file",
            &m.ca.display().to_string(),
        ])
        .start();
    let mut r = replica.resp();
    wait_for(Duration::from_secs(30), "the replica's full sync", || {
        replica.info("replication", "master_link_status").as_deref() == Some("up")
            && r.cmd(&["DBSIZE"]) == Reply::Int(100)
    });
    w.cmd(&["SET", "after-sync", "1"]);
    wait_for(Duration::from_secs(10), "the stream after the sync", || {
        r.cmd(&["GET", "after-sync"]) == Reply::Bulk(b"1".to_vec())
    });
    assert_eq!(
        master.info("replication", "connected_slaves").as_deref(),
        Some("1")
    );
}

/// tessera-node as a replica with `tls-replication yes`, of a redis-server master and of a
/// tessera-node master, each on its TLS port with client certificates required: the full
/// sync, then the stream. Its client certificate is tls-client-cert-file (the server
/// certificate is for serving).
#[test]
fn tessera_replica_syncs_over_tls() {
    tessera_replica_sync(&Certs::new().main);
}

fn tessera_replica_sync(m: &Authority) {
    for master_kind in [Launch::redis(), Launch::tessera()] {
        let tls_port = free_port();
        let master = master_kind
            .args(&["--save", ""])
            .args(&m.server_args(tls_port))
            .start();
        let bin = master.bin().to_string();
        let mut w = master.resp();
        for i in 0..100 {
            w.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]);
        }
        let path = |p: &std::path::Path| p.display().to_string();
        let replica_tls_port = free_port();
        let replica = Launch::tessera()
            .args(&["--save", "", "--tls-replication", "yes"])
            .args(&["--replicaof", "127.0.0.1", &tls_port.to_string()])
            .args(&["--tls-port", &replica_tls_port.to_string()])
            .args(&["--tls-cert-file", &path(&m.server_cert)])
            .args(&["--tls-key-file", &path(&m.server_key)])
            .args(&["--tls-client-cert-file", &path(&m.client_cert)])
            .args(&["--tls-client-key-file", &path(&m.client_key)])
            .args(&["--tls-ca-cert-file", &path(&m.ca)])
            .start();
        let mut r = replica.resp();
        wait_for(
            Duration::from_secs(30),
            &format!("full sync from {bin}"),
            || {
                replica.info("replication", "master_link_status").as_deref() == Some("up")
                    && r.cmd(&["DBSIZE"]) == Reply::Int(100)
            },
        );
        w.cmd(&["SET", "after-sync", "1"]);
        wait_for(
            Duration::from_secs(10),
            &format!("stream from {bin}"),
            || r.cmd(&["GET", "after-sync"]) == Reply::Bulk(b"1".to_vec()),
        );
        // Replicating over TLS, the replica announces its TLS port (as Redis's does).
        let slave0 = master.info("replication", "slave0").unwrap_or_default();
        assert!(
            slave0.contains(&format!("port={replica_tls_port},")),
            "{bin}'s slave0: {slave0}"
        );
    }
}

/// A replica whose CA did not sign the master's certificate never links (and says why).
#[test]
fn tessera_replica_refuses_a_master_of_another_ca() {
    let certs = Certs::new();
    let (m, o) = (&certs.main, &certs.other);
    let tls_port = free_port();
    let _master = Launch::redis()
        .args(&["--save", "", "--tls-auth-clients", "no"])
        .args(&m.server_args(tls_port))
        .start();
    let path = |p: &std::path::Path| p.display().to_string();
    let replica = Launch::tessera()
        .args(&["--save", "", "--tls-replication", "yes"])
        .args(&["--replicaof", "127.0.0.1", &tls_port.to_string()])
        .args(&["--tls-cert-file", &path(&o.server_cert)])
        .args(&["--tls-key-file", &path(&o.server_key)])
        .args(&["--tls-ca-cert-file", &path(&o.ca)])
        .start();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        replica.info("replication", "master_link_status").as_deref(),
        Some("down")
    );
}

/// The DER of the one certificate in a PEM file.
fn der_of(pem: &std::path::Path) -> Vec<u8> {
    rustls::pki_types::CertificateDer::from_pem_file(pem)
        .expect("certificate PEM")
        .to_vec()
}

/// A certificate rotated under the same paths, as a Kubernetes Secret is updated under a
/// running pod: the files on disk are replaced, then `CONFIG SET tls-cert-file <same path>
/// tls-key-file <same path>` makes new TLS connections get the new certificate (Redis 7.0's
/// tls-* file settings are VOLATILE: setting the same value reloads) while a connection made
/// before goes on. CONFIG GET shows the paths as given, a relative one included (both
/// servers open it from `dir`). Compared whole with redis-server 7.0.
#[test]
fn same_path_certificate_reload_like_redis() {
    let certs = Certs::new();
    let (m, o) = (&certs.main, &certs.other);
    let (main_der, other_der) = (der_of(&m.server_cert), der_of(&o.server_cert));
    let mut stories = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().display().to_string();
        // The server's own copies of main's server certificate and key, rewritten below:
        // the certificate named relative to `dir`, the key by its absolute path.
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::copy(&m.server_cert, &cert).expect("copy cert");
        std::fs::copy(&m.server_key, &key).expect("copy key");
        let key_arg = key.display().to_string();
        let tls_port = free_port();
        let s = l
            .dir(dir.path())
            .args(&["--save", "", "--tls-port", &tls_port.to_string()])
            .args(&["--tls-cert-file", "tls.crt", "--tls-key-file", &key_arg])
            .args(&["--tls-ca-cert-file", &m.ca.display().to_string()])
            .start();
        // What a new TLS connection is shown: main's certificate, other's, or neither.
        let served = || {
            let mut c = TlsConn::open_trusting(tls_port, m, &[m, o]);
            let pong = c.cmd("PING");
            let der = c.peer_cert();
            let which = if der == main_der {
                "main"
            } else if der == other_der {
                "other"
            } else {
                "unknown"
            };
            format!("{pong} from {which}")
        };
        let get = |name: &str| {
            let (ok, text) = cli(tls_port, &m.client_args(true), &["CONFIG", "GET", name]);
            (ok, text.replace(&d, "D"))
        };
        let mut out = vec![
            format!("get cert: {:?}", get("tls-cert-file")),
            format!("get key: {:?}", get("tls-key-file")),
            format!("new conn: {}", served()),
        ];
        let mut kept = TlsConn::open_trusting(tls_port, m, &[m, o]);
        out.push(format!("kept conn: {}", kept.cmd("PING")));
        // The Secret changes: other's certificate and key under the same names.
        std::fs::copy(&o.server_cert, &cert).expect("replace cert");
        std::fs::copy(&o.server_key, &key).expect("replace key");
        out.push(format!("new conn, files replaced: {}", served()));
        let set = cli(
            tls_port,
            &m.client_args(true),
            &[
                "CONFIG",
                "SET",
                "tls-cert-file",
                "tls.crt",
                "tls-key-file",
                &key_arg,
            ],
        );
        out.push(format!("set same paths: {set:?}"));
        out.push(format!("new conn after set: {}", served()));
        out.push(format!("kept conn after set: {}", kept.cmd("PING")));
        out.push(format!("get cert after set: {:?}", get("tls-cert-file")));
        out.push(format!("get key after set: {:?}", get("tls-key-file")));
        drop(s);
        stories.push(out);
    }
    assert_eq!(
        stories[1], stories[0],
        "tessera (left) vs redis-server (right)"
    );
    assert!(
        stories[0].contains(&"new conn after set: +PONG from other".to_string()),
        "{:#?}",
        stories[0]
    );
}

/// tls-key-file-pass with OpenSSL's legacy PEM encryption (`Proc-Type: 4,ENCRYPTED`, what
/// `openssl ec -aes256` / `-des3` write, MD5-derived key): the server key loads with its
/// pass phrase (redis-cli --tls is then served), and stops the server without it or with a
/// wrong one, on both servers, for AES-256-CBC and DES-EDE3-CBC.
#[test]
fn legacy_pem_encrypted_key_with_tls_key_file_pass_like_redis() {
    let certs = Certs::new();
    let m = &certs.main;
    let dir = tempfile::tempdir().expect("tempdir");
    for (cipher, dek) in [("-aes256", "AES-256-CBC"), ("-des3", "DES-EDE3-CBC")] {
        let enc = dir.path().join(format!("legacy{cipher}.key"));
        let o = std::process::Command::new("openssl")
            .args(["ec", "-in", &m.server_key.display().to_string(), cipher])
            .args([
                "-passout",
                "pass:s3cret",
                "-out",
                &enc.display().to_string(),
            ])
            .output()
            .expect("openssl is needed to encrypt a key: scripts/install-deps.sh installs it");
        assert!(
            o.status.success(),
            "openssl ec failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = std::fs::read_to_string(&enc).expect("encrypted key");
        assert!(
            text.starts_with("-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n")
                && text.contains(&format!("DEK-Info: {dek},")),
            "not OpenSSL's legacy PEM encryption:\n{text}"
        );
        let enc = enc.display().to_string();
        let outcomes = key_pass_outcomes(
            m,
            &enc,
            "s3cret",
            &[None, Some("wrong"), Some("s3cret ")],
            cipher,
        );
        assert_eq!(
            outcomes[0],
            ((true, "PONG".to_string()), vec![true, true, true]),
            "redis {cipher}"
        );
        assert_eq!(outcomes[1], outcomes[0], "tessera / redis {cipher}");
    }
}

/// tls-client-key-file is loaded at start as Redis's tlsConfigure does: its wrong pass
/// phrase (tls-client-key-file-pass) stops the start, the right one serves.
#[test]
fn client_key_is_loaded_at_start_like_redis() {
    let certs = Certs::new();
    let m = &certs.main;
    let dir = tempfile::tempdir().expect("tempdir");
    let enc = m.encrypted_server_key("cl1ent").display().to_string();
    let client_cert = m.server_cert.display().to_string();
    let mut outcomes = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let bin = l.bin().to_string();
        let mut seen = Vec::new();
        for pass in ["cl1ent", "wrong"] {
            let port = free_port();
            let args: Vec<String> = m
                .server_args(port)
                .into_iter()
                .chain([
                    "--tls-client-cert-file".to_string(),
                    client_cert.clone(),
                    "--tls-client-key-file".to_string(),
                    enc.clone(),
                    "--tls-client-key-file-pass".to_string(),
                    pass.to_string(),
                ])
                .collect();
            if pass == "wrong" {
                let exit = Launch::new(&bin)
                    .args(&["--save", ""])
                    .args(&args)
                    .run_to_exit(dir.path(), Duration::from_secs(20));
                seen.push(format!(
                    "{pass}: refused {}, names the key {}",
                    exit.failed(),
                    exit.output.contains("Failed to load private key: ")
                ));
            } else {
                let s = Launch::new(&bin).args(&["--save", ""]).args(&args).start();
                seen.push(format!(
                    "{pass}: {:?}",
                    cli(port, &m.client_args(true), &["PING"])
                ));
                drop(s);
            }
        }
        outcomes.push(seen);
    }
    assert_eq!(
        outcomes[0],
        [
            "cl1ent: (true, \"PONG\")".to_string(),
            "wrong: refused true, names the key true".to_string()
        ],
        "redis"
    );
    assert_eq!(outcomes[1], outcomes[0], "tessera / redis");
}

/// X.509 v1 certificates, which `openssl x509 -req` writes when given no extension file and
/// which OpenSSL (so redis-server) accepts: served, required from clients, refused from
/// another CA's clients and to clients trusting another CA, over TLS 1.3 and 1.2, on both
/// servers alike.
#[test]
fn v1_certificates_like_redis() {
    let certs = Certs::openssl_v1();
    let (m, o) = (&certs.main, &certs.other);
    let path = |p: &std::path::Path| p.display().to_string();
    let wrong_ca: Vec<String> = [
        "--tls",
        "--cacert",
        &path(&o.ca),
        "--cert",
        &path(&m.client_cert),
        "--key",
        &path(&m.client_key),
    ]
    .map(String::from)
    .to_vec();
    let mut stories = Vec::new();
    for l in [Launch::redis(), Launch::tessera()] {
        let port = free_port();
        let s = l.args(&["--save", ""]).args(&m.server_args(port)).start();
        let mut out = Vec::new();
        let round = |out: &mut Vec<String>, tag: &str| {
            note(
                out,
                &format!("{tag} ping"),
                cli(port, &m.client_args(true), &["PING"]),
            );
            let refused = |args: &[String]| (cli(port, args, &["PING"]).0, String::new());
            note(
                out,
                &format!("{tag} no cert"),
                refused(&m.client_args(false)),
            );
            note(
                out,
                &format!("{tag} other CA's client"),
                refused(&o.client_args(true)),
            );
            note(
                out,
                &format!("{tag} client trusting another CA"),
                refused(&wrong_ca),
            );
        };
        round(&mut out, "TLSv1.3");
        let set = s.resp().cmd(&["CONFIG", "SET", "tls-protocols", "TLSv1.2"]);
        assert_eq!(set, Reply::Simple("OK".into()), "{}", s.bin());
        round(&mut out, "TLSv1.2");
        stories.push(out);
    }
    let expected: Vec<String> = ["TLSv1.3", "TLSv1.2"]
        .iter()
        .flat_map(|t| {
            [
                format!("{t} ping: (true, \"PONG\")"),
                format!("{t} no cert: (false, \"\")"),
                format!("{t} other CA's client: (false, \"\")"),
                format!("{t} client trusting another CA: (false, \"\")"),
            ]
        })
        .collect();
    assert_eq!(stories[0], expected, "redis-server");
    assert_eq!(stories[1], stories[0], "tessera-node / redis-server");
}

/// Replication over TLS with v1 certificates on both ends: a redis-server replica of
/// tessera-node and tessera-node replicas of both servers (tessera-node checks the master's
/// v1 certificate and shows its own v1 client certificate).
#[test]
fn replication_over_tls_with_v1_certificates() {
    let certs = Certs::openssl_v1();
    redis_replica_sync(&certs.main);
    tessera_replica_sync(&certs.main);
}

/// tls-key-file-pass with keys encrypted under PKCS#12's 3DES schemes (`openssl pkcs8
/// -topk8 -v1 PBE-SHA1-3DES` / `PBE-SHA1-2DES`): opened with the pass phrase, refused
/// without it or with a wrong one, as by redis-server. A key under PKCS#5's single-DES
/// PBES1, which OpenSSL 3 writes only with its legacy provider, stops both servers.
#[test]
fn pkcs12_encrypted_keys_like_redis() {
    let certs = Certs::new();
    let m = &certs.main;
    for scheme in ["PBE-SHA1-3DES", "PBE-SHA1-2DES"] {
        let enc = m.encrypted_server_key_as("s3cret", &["-v1", scheme]);
        let outcomes = key_pass_outcomes(
            m,
            &enc.display().to_string(),
            "s3cret",
            &[None, Some("wrong")],
            scheme,
        );
        assert_eq!(
            outcomes[0],
            ((true, "PONG".to_string()), vec![true, true]),
            "redis-server, {scheme}"
        );
        assert_eq!(outcomes[1], outcomes[0], "tessera / redis, {scheme}");
    }
    let legacy = m.encrypted_server_key_as(
        "s3cret",
        &[
            "-v1",
            "PBE-SHA1-DES",
            "-provider",
            "legacy",
            "-provider",
            "default",
        ],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for l in [Launch::redis(), Launch::tessera()] {
        let bin = l.bin().to_string();
        let mut args = m.server_args(free_port());
        args[5] = legacy.display().to_string();
        args.extend(["--tls-key-file-pass".to_string(), "s3cret".to_string()]);
        let exit = l
            .args(&["--save", ""])
            .args(&args)
            .run_to_exit(dir.path(), Duration::from_secs(20));
        assert!(
            exit.failed() && exit.output.contains("Failed to load private key: "),
            "{bin}: {}",
            exit.output
        );
    }
}
