//! The pod readiness probe (`tessera-node --ready-probe`) on a node whose `default` user is
//! off: it logs in as the operator's own user named by the pod's environment, so it still
//! judges the node by its INFO (replica link, loading) rather than by answering alone. And
//! the probe over TLS, against a node serving TLS only (`--port 0 --tls-port P`), as the
//! operator runs node pods.

use std::path::Path;
use std::time::{Duration, Instant};

use tessera_testkit::tls::{tls_only_server, Authority, Certs};
use tessera_testkit::*;

/// Runs `tessera-node --ready-probe ARGS...`: its exit code and what it printed.
fn probe_run(args: &[String], admin: Option<(&str, &str)>) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all = vec!["--ready-probe".to_string()];
    all.extend_from_slice(args);
    // The probe is a one-shot client run of the binary: the test kit's command line,
    // verbatim (no --port/--dir of a server).
    let mut cmd =
        Launch::new(tessera_bin())
            .verbatim()
            .args(&all)
            .command("127.0.0.1", 0, dir.path());
    cmd.stdout(std::process::Stdio::piped())
        .env("POD_IP", "127.0.0.1")
        .env_remove("REDISCLI_AUTH")
        .env_remove("TESSERA_OPERATOR_USER")
        .env_remove("TESSERA_OPERATOR_PASSWORD");
    if let Some((u, p)) = admin {
        cmd.env("TESSERA_OPERATOR_USER", u)
            .env("TESSERA_OPERATOR_PASSWORD", p);
    }
    let out = output_within(&mut cmd, Duration::from_secs(30));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

fn probe(port: u16, admin: Option<(&str, &str)>) -> (bool, String) {
    let (code, said) = probe_run(&[port.to_string()], admin);
    (code == Some(0), said)
}

/// A tessera-node serving TLS only, with `tls-auth-clients yes` (the default) and `args`.
fn tls_only_node(a: &Authority, args: &[&str]) -> (Process, u16, tempfile::TempDir) {
    tls_only_server(tessera_bin(), a, args)
}

#[test]
fn probe_logs_in_as_the_operator_user_when_default_is_off() {
    let s = Server::tessera(&[
        "--user",
        "tessera-operator",
        "on",
        ">adm",
        "~*",
        "&*",
        "+@all",
        "--user",
        "default",
        "off",
    ]);
    let (ok, said) = probe(s.port, Some(("tessera-operator", "adm")));
    assert!(
        ok && said == "ready: master",
        "with the operator's user: {ok} {said:?}"
    );
    // A replica whose master is unreachable is seen as not ready through the user.
    let mut c = s.resp();
    c.cmd(&["AUTH", "tessera-operator", "adm"]);
    c.cmd(&["REPLICAOF", "127.0.0.1", "1"]);
    let (ok, said) = probe(s.port, Some(("tessera-operator", "adm")));
    assert!(
        !ok && said.contains("link to its master is down"),
        "{ok} {said:?}"
    );
    // Without it the probe can only see that the node answers.
    let (ok, said) = probe(s.port, None);
    assert!(
        ok && said.contains("cannot log in"),
        "without the user: {ok} {said:?}"
    );
    // A wrong password for the user falls back to REDISCLI_AUTH's (none here).
    let (ok, said) = probe(s.port, Some(("tessera-operator", "wrong")));
    assert!(
        ok && said.contains("cannot log in"),
        "wrong password: {ok} {said:?}"
    );
}

/// The probe with `--tls-cert-file/--tls-key-file/--tls-ca-cert-file` against a TLS-only
/// node that wants client certificates: ready with the node's CA (logging in as the
/// operator's user over TLS), not ready (exit 1) with a CA that did not sign the node's
/// certificate, without a client certificate, or speaking plaintext to the TLS port.
#[test]
fn probe_speaks_tls_to_a_tls_only_node() {
    let certs = Certs::new();
    let (m, o) = (&certs.main, &certs.other);
    let (_node, port, _dir) = tls_only_node(
        m,
        &[
            "--user",
            "tessera-operator",
            "on",
            ">adm",
            "~*",
            "&*",
            "+@all",
            "--user",
            "default",
            "off",
        ],
    );
    let path = |p: &Path| p.display().to_string();
    let flags = |client: Option<&Authority>, ca: &Path| {
        let mut v = vec![port.to_string()];
        if let Some(c) = client {
            v.extend([
                "--tls-cert-file".into(),
                path(&c.client_cert),
                "--tls-key-file".into(),
                path(&c.client_key),
            ]);
        }
        v.extend(["--tls-ca-cert-file".into(), path(ca)]);
        v
    };
    let admin = Some(("tessera-operator", "adm"));
    // The node may still be loading its (empty) dataset when its port first accepts.
    let mut last = (None, String::new());
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        last = probe_run(&flags(Some(m), &m.ca), admin);
        if last.0 == Some(0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(last, (Some(0), "ready: master".to_string()), "mutual TLS");

    // The server certificate was signed by another CA than the one given.
    let (code, said) = probe_run(&flags(Some(m), &o.ca), admin);
    assert_eq!(code, Some(1), "another CA: {said:?}");
    assert!(
        said.contains("cannot reach the node") && said.contains("certificate"),
        "another CA: {said:?}"
    );
    // tls-auth-clients yes: no client certificate, no connection.
    let (code, said) = probe_run(&flags(None, &m.ca), admin);
    assert_eq!(code, Some(1), "no client certificate: {said:?}");
    // Plaintext on the TLS port.
    let (code, said) = probe_run(&[port.to_string()], admin);
    assert_eq!(code, Some(1), "plaintext: {said:?}");
    // A CA file that cannot be read: not ready, saying why; a bad command line: exit 2.
    let (code, said) = probe_run(&flags(Some(m), Path::new("/nonexistent/ca.crt")), admin);
    assert!(
        code == Some(1) && said.starts_with("TLS: ") && said.contains("/nonexistent/ca.crt"),
        "{code:?} {said:?}"
    );
    let (code, said) = probe_run(
        &[
            port.to_string(),
            "--tls-cert-file".into(),
            path(&m.client_cert),
        ],
        admin,
    );
    assert!(
        code == Some(2) && said.contains("usage: tessera-node --ready-probe"),
        "{code:?} {said:?}"
    );
}
