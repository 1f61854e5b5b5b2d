//! The pod readiness probe (`tessera-node --ready-probe`) on a node whose `default` user is
//! off: it logs in as the operator's own user named by the pod's environment, so it still
//! judges the node by its INFO (replica link, loading) rather than by answering alone.

use tessera_testkit::*;

fn probe(port: u16, admin: Option<(&str, &str)>) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    // The probe is a one-shot client run of the binary: the test kit's command line,
    // verbatim (no --port/--dir of a server).
    let mut cmd = Launch::new(tessera_bin())
        .verbatim()
        .args(&["--ready-probe", &port.to_string()])
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
    let out = cmd.output().expect("run tessera-node --ready-probe");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
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
