//! The v1 path (`legacy::verify_chain`) against certificates the `openssl` command writes:
//! a v1 leaf under a root, under an intermediate CA, under an intermediate that is no CA,
//! under another root; expired, not yet valid, and with a damaged signature.

use std::path::Path;
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::{CertificateError, Error};
use tessera_testkit::tls::openssl;
use tessera_tls::{is_legacy, legacy, Anchors};

fn root(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "30",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

/// `name` signed by `issuer`; `ext`: an extension file's text (none: a v1 certificate).
fn signed(dir: &Path, name: &str, issuer: &str, ext: Option<&str>) {
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    let mut args: Vec<String> = [
        "x509",
        "-req",
        "-days",
        "30",
        "-in",
        &format!("{name}.csr"),
        "-CA",
        &format!("{issuer}.crt"),
        "-CAkey",
        &format!("{issuer}.key"),
        "-out",
        &format!("{name}.crt"),
    ]
    .map(String::from)
    .to_vec();
    if let Some(text) = ext {
        std::fs::write(dir.join(format!("{name}.ext")), text).expect("write ext");
        args.extend(["-extfile".into(), format!("{name}.ext")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    openssl(dir, &args);
}

fn der(dir: &Path, name: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(dir.join(format!("{name}.crt"))).expect("certificate")
}

fn now_plus(days: i64) -> UnixTime {
    let t = SystemTime::now();
    let d = Duration::from_secs(days.unsigned_abs() * 86_400);
    UnixTime::since_unix_epoch(
        if days >= 0 { t + d } else { t - d }
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970"),
    )
}

#[test]
fn v1_paths_as_openssl_checks_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    root(d, "root");
    root(d, "other-root");
    signed(
        d,
        "inter",
        "root",
        Some("basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign\n"),
    );
    signed(d, "not-ca", "root", Some("basicConstraints=CA:FALSE\n"));
    signed(d, "leaf", "root", None);
    signed(d, "leaf-via-inter", "inter", None);
    signed(d, "leaf-via-not-ca", "not-ca", None);
    signed(d, "leaf-other", "other-root", None);

    let algs = rustls::crypto::ring::default_provider().signature_verification_algorithms;
    let anchors = Anchors::from_certs(&[der(d, "root")]);
    let check = |leaf: &str, inter: &[&str], at: UnixTime| {
        let chain: Vec<_> = inter.iter().map(|n| der(d, n)).collect();
        legacy::verify_chain(&der(d, leaf), &chain, &anchors, &algs, at)
    };
    let now = now_plus(0);
    assert!(
        is_legacy(der(d, "leaf").as_ref()),
        "openssl x509 -req wrote v3"
    );
    assert!(!is_legacy(der(d, "inter").as_ref()));

    assert_eq!(check("leaf", &[], now), Ok(()));
    assert_eq!(check("leaf-via-inter", &["inter"], now), Ok(()));
    // Unrelated certificates sent along do not matter.
    assert_eq!(check("leaf", &["not-ca", "inter"], now), Ok(()));
    let unknown = Err(Error::InvalidCertificate(CertificateError::UnknownIssuer));
    assert_eq!(
        check("leaf-via-inter", &[], now),
        unknown,
        "intermediate not sent"
    );
    assert_eq!(
        check("leaf-via-not-ca", &["not-ca"], now),
        unknown,
        "issuer is no CA"
    );
    assert_eq!(check("leaf-other", &[], now), unknown, "another root");
    assert_eq!(
        check("leaf", &[], now_plus(40)),
        Err(Error::InvalidCertificate(CertificateError::Expired))
    );
    assert_eq!(
        check("leaf", &[], now_plus(-2)),
        Err(Error::InvalidCertificate(CertificateError::NotValidYet))
    );
    // A leaf whose issuer name is the root's but whose signature is not.
    let mut bad = der(d, "leaf").as_ref().to_vec();
    let last = bad.len() - 2;
    bad[last] ^= 0x5a;
    assert_eq!(
        legacy::verify_chain(&CertificateDer::from(bad), &[], &anchors, &algs, now),
        Err(Error::InvalidCertificate(CertificateError::BadSignature))
    );
    // A self-signed v1 certificate that is itself the trusted one.
    signed(d, "self", "root", None);
    openssl(
        d,
        &[
            "x509", "-req", "-days", "30", "-in", "self.csr", "-signkey", "self.key", "-out",
            "self.crt",
        ],
    );
    assert!(is_legacy(der(d, "self").as_ref()));
    let own = Anchors::from_certs(&[der(d, "self")]);
    // Checked at a time taken after openssl made it: `now` is from before, and a second
    // boundary crossed in between made it not valid yet (a CI run under load).
    assert_eq!(
        legacy::verify_chain(&der(d, "self"), &[], &own, &algs, now_plus(0)),
        Ok(())
    );
}
