//! `tessera-node --ready-probe [port] [--tls-cert-file F --tls-key-file F]
//! [--tls-ca-cert-file F]`: the readiness check of a node pod. The node image has no shell
//! and no redis-cli, so the binary checks itself, as `redis-cli INFO` plus a test would.
//!
//! Ready means: the node answers INFO on `$POD_IP` (else 127.0.0.1), is not loading its
//! dataset, and, when it is a replica, its link to its master is up. The password comes from
//! `REDISCLI_AUTH`, as for redis-cli. A node that refuses that password (changed live by the
//! operator since the pod started) is judged on answering alone, as a TCP probe would: the
//! password is the operator's business, and unreadying every pod on a rotation would be worse.
//! When the pod names the operator's own user (`TESSERA_OPERATOR_USER` and
//! `TESSERA_OPERATOR_PASSWORD`), the probe logs in as that user first, so a node whose
//! `default` user is off is still judged on its INFO.
//!
//! With `--tls-ca-cert-file` the port is a TLS port (a node run with `--port 0 --tls-port P`):
//! the node's certificate chain is verified against that CA, and not its host name (Redis
//! never checks it; the pod is reached by IP), and the client certificate and key are shown
//! when given (`tls-auth-clients yes`). The files are read as the node reads its own.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// Bound on connecting, and on each read and write, TLS handshake included (the kubelet's
/// own timeout is longer).
const TIMEOUT: Duration = Duration::from_secs(2);
/// Largest INFO reply accepted.
const MAX_REPLY: usize = 1 << 20;
/// Port when none is given.
const DEFAULT_PORT: u16 = 6379;
const USAGE: &str = "usage: tessera-node --ready-probe [port] \
    [--tls-cert-file FILE --tls-key-file FILE] [--tls-ca-cert-file FILE]";

/// Why the node is not ready (or could not be asked).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot reach the node: {0}")]
    Io(#[from] std::io::Error),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("{0}")]
    Protocol(String),
    #[error("not ready: {0}")]
    NotReady(&'static str),
}

/// The probe's command line, after `--ready-probe`.
#[derive(Debug, PartialEq)]
struct Args {
    port: u16,
    /// Set by `--tls-ca-cert-file`: the port speaks TLS.
    tls: Option<TlsArgs>,
}

#[derive(Debug, PartialEq)]
struct TlsArgs {
    ca_file: String,
    /// `--tls-cert-file` and `--tls-key-file`, given together.
    client: Option<(String, String)>,
}

/// Reads `[port] [--flag value]...`; the error says what is wrong (the usage line follows).
fn parse_args(args: &[String]) -> Result<Args, String> {
    let (port, flags) = match args.first() {
        Some(p) if !p.starts_with("--") => {
            let port = p.parse::<u16>().map_err(|_| format!("bad port {p:?}"))?;
            (port, &args[1..])
        }
        _ => (DEFAULT_PORT, args),
    };
    let (mut cert, mut key, mut ca) = (None, None, None);
    let mut rest = flags.iter();
    while let Some(flag) = rest.next() {
        let slot = match flag.as_str() {
            "--tls-cert-file" => &mut cert,
            "--tls-key-file" => &mut key,
            "--tls-ca-cert-file" => &mut ca,
            _ => return Err(format!("unknown argument {flag:?}")),
        };
        let value = rest
            .next()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{flag} needs a file"))?;
        if slot.replace(value.clone()).is_some() {
            return Err(format!("{flag} given twice"));
        }
    }
    let client = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => return Err("--tls-cert-file and --tls-key-file go together".into()),
    };
    let tls = match (ca, client) {
        (Some(ca_file), client) => Some(TlsArgs { ca_file, client }),
        (None, None) => None,
        (None, Some(_)) => return Err("a client certificate needs --tls-ca-cert-file".into()),
    };
    Ok(Args { port, tls })
}

/// Runs the probe; returns the process exit code (0 ready, 1 not, 2 a bad command line).
pub fn run(args: &[String]) -> i32 {
    let args = match parse_args(args) {
        Ok(a) => a,
        Err(why) => {
            println!("{why}\n{USAGE}");
            return 2;
        }
    };
    let tls = match &args.tls {
        None => None,
        Some(t) => {
            let client = t.client.as_ref().map(|(c, k)| (c.as_str(), k.as_str()));
            match tessera_node::server::tls::client_config_from_files(&t.ca_file, client) {
                Ok(cfg) => Some(cfg),
                Err(e) => {
                    println!("{}", ProbeError::Tls(e.to_string()));
                    return 1;
                }
            }
        }
    };
    let host = std::env::var("POD_IP")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "127.0.0.1".to_string());
    let password = std::env::var("REDISCLI_AUTH")
        .ok()
        .filter(|p| !p.is_empty());
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let admin = var("TESSERA_OPERATOR_USER").zip(var("TESSERA_OPERATOR_PASSWORD"));
    let admin = admin.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
    match check(&host, args.port, tls, admin, password.as_deref()) {
        Ok(why) => {
            println!("ready: {why}");
            0
        }
        Err(e) => {
            println!("{e}");
            1
        }
    }
}

/// A RESP reply, as far as the probe cares.
enum Reply {
    Ok(String),
    Error(String),
}

fn check(
    host: &str,
    port: u16,
    tls: Option<Arc<rustls::ClientConfig>>,
    admin: Option<(&str, &str)>,
    password: Option<&str>,
) -> Result<&'static str, ProbeError> {
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| ProbeError::Protocol(format!("{host} has no address")))?;
    let stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    // The TLS handshake runs inside the reads and writes below: bounded by these too.
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    match tls {
        None => ask(stream, admin, password),
        Some(cfg) => {
            // Not checked (see the module doc); rustls wants one, and sends no SNI for an IP.
            let name = rustls::pki_types::ServerName::from(addr.ip());
            let conn = rustls::ClientConnection::new(cfg, name)
                .map_err(|e| ProbeError::Tls(e.to_string()))?;
            ask(rustls::StreamOwned::new(conn, stream), admin, password)
        }
    }
}

/// Logs in (the operator's user, else the password) and judges INFO, over a plain or a
/// TLS stream.
fn ask(
    stream: impl Read + Write,
    admin: Option<(&str, &str)>,
    password: Option<&str>,
) -> Result<&'static str, ProbeError> {
    let mut conn = BufReader::new(stream);
    let mut logged_in = false;
    if let Some((user, pw)) = admin {
        send(&mut conn, &["AUTH", user, pw])?;
        // A node started before the user existed refuses it: the password below may do.
        logged_in = matches!(read_reply(&mut conn)?, Reply::Ok(_));
    }
    if let Some(pw) = password.filter(|_| !logged_in) {
        send(&mut conn, &["AUTH", pw])?;
        // A refused password is not fatal: INFO below tells whether the node needs one.
        read_reply(&mut conn)?;
    }
    send(&mut conn, &["INFO"])?;
    match read_reply(&mut conn)? {
        Reply::Ok(info) => verdict(&info),
        Reply::Error(e) if e.starts_with("NOAUTH") => {
            Ok("answering (cannot log in to see more; the password changed?)")
        }
        Reply::Error(e) => Err(ProbeError::Protocol(format!("INFO: {e}"))),
    }
}

/// Writes one command to the stream under `conn`'s read buffer (a reply is read only after
/// its command is sent, so nothing buffered is skipped).
fn send<S: Write>(conn: &mut BufReader<S>, args: &[&str]) -> Result<(), ProbeError> {
    let w = conn.get_mut();
    w.write_all(&command(args))?;
    // A TLS stream sends the encrypted records here.
    w.flush()?;
    Ok(())
}

/// Judges an INFO reply.
pub fn verdict(info: &str) -> Result<&'static str, ProbeError> {
    let field = |name: &str| {
        info.lines().find_map(|l| {
            l.trim_end_matches('\r')
                .strip_prefix(name)?
                .strip_prefix(':')
                .map(str::to_string)
        })
    };
    if field("loading").as_deref() != Some("0") {
        return Err(ProbeError::NotReady("loading the dataset"));
    }
    match field("role").as_deref() {
        Some("slave") if field("master_link_status").as_deref() == Some("up") => {
            Ok("replica linked to its master")
        }
        Some("slave") => Err(ProbeError::NotReady(
            "replica whose link to its master is down",
        )),
        Some(_) => Ok("master"),
        None => Err(ProbeError::Protocol("INFO has no role".into())),
    }
}

/// A command as a RESP array of bulk strings.
fn command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one simple, error or bulk-string reply.
fn read_reply(r: &mut impl BufRead) -> Result<Reply, ProbeError> {
    let mut line = String::new();
    r.by_ref().take(MAX_REPLY as u64).read_line(&mut line)?;
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at_checked(1).unwrap_or(("", ""));
    match kind {
        "+" => Ok(Reply::Ok(rest.to_string())),
        "-" => Ok(Reply::Error(rest.to_string())),
        "$" => {
            let len: usize = rest
                .parse()
                .ok()
                .filter(|n| *n <= MAX_REPLY)
                .ok_or_else(|| ProbeError::Protocol(format!("bad bulk length {rest:?}")))?;
            let mut body = vec![0; len.saturating_add(2)];
            r.read_exact(&mut body)?;
            body.truncate(len);
            Ok(Reply::Ok(String::from_utf8_lossy(&body).into_owned()))
        }
        _ => Err(ProbeError::Protocol(format!("unexpected reply {line:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let master =
            "# Persistence\r\nloading:0\r\nasync_loading:0\r\n# Replication\r\nrole:master\r\n";
        assert!(verdict(master).is_ok());
        let loading = master.replace("loading:0\r\nasync", "loading:1\r\nasync");
        assert!(verdict(&loading).is_err());
        // async_loading is another field.
        assert!(verdict("async_loading:1\r\nloading:0\r\nrole:master\r\n").is_ok());
        let replica = "loading:0\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_link_status:";
        assert!(verdict(&format!("{replica}up\r\n")).is_ok());
        assert!(verdict(&format!("{replica}down\r\n")).is_err());
        assert!(verdict("loading:0\r\nrole:slave\r\n").is_err());
        assert!(verdict("").is_err());
    }

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn arguments() {
        let plain = |port| Ok(Args { port, tls: None });
        assert_eq!(parse(&[]), plain(DEFAULT_PORT));
        assert_eq!(parse(&["7000"]), plain(7000));
        let tls = |port, client: Option<(&str, &str)>| {
            Ok(Args {
                port,
                tls: Some(TlsArgs {
                    ca_file: "/tls/ca.crt".into(),
                    client: client.map(|(c, k)| (c.into(), k.into())),
                }),
            })
        };
        assert_eq!(
            parse(&[
                "6379",
                "--tls-cert-file",
                "/tls/tls.crt",
                "--tls-key-file",
                "/tls/tls.key",
                "--tls-ca-cert-file",
                "/tls/ca.crt",
            ]),
            tls(6379, Some(("/tls/tls.crt", "/tls/tls.key")))
        );
        // Any order; the port may be left out; the CA alone is TLS without a client cert.
        assert_eq!(
            parse(&[
                "--tls-ca-cert-file",
                "/tls/ca.crt",
                "--tls-key-file",
                "k",
                "--tls-cert-file",
                "c"
            ]),
            tls(DEFAULT_PORT, Some(("c", "k")))
        );
        assert_eq!(
            parse(&["6380", "--tls-ca-cert-file", "/tls/ca.crt"]),
            tls(6380, None)
        );
        for bad in [
            &["x"][..],
            &["70000"],
            &["-1"],
            &["6379", "7000"],
            &["6379", "--tls-ca-cert-file"],
            &["6379", "--tls-ca-cert-file", ""],
            &["6379", "--tls-ca-cert-file", "a", "--tls-ca-cert-file", "b"],
            &["6379", "--tls-cert-file", "c", "--tls-ca-cert-file", "a"],
            &["6379", "--tls-key-file", "k", "--tls-ca-cert-file", "a"],
            &["6379", "--tls-cert-file", "c", "--tls-key-file", "k"],
            &["6379", "--tls", "--tls-ca-cert-file", "a"],
            &["--port", "6379"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted: {:?}", parse(bad));
        }
    }

    #[test]
    fn usage_errors_exit_2() {
        let args = |a: &[&str]| a.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(run(&args(&["nope"])), 2);
        assert_eq!(run(&args(&["6379", "--tls-cert-file", "c"])), 2);
        // A CA file that cannot be read is not a usage error: not ready.
        assert_eq!(
            run(&args(&[
                "6379",
                "--tls-ca-cert-file",
                "/nonexistent/ca.crt"
            ])),
            1
        );
    }

    #[test]
    fn replies() {
        let mut r = BufReader::new(&b"$5\r\nhello\r\n+OK\r\n-NOAUTH x\r\n$99999999\r\n"[..]);
        assert!(matches!(read_reply(&mut r), Ok(Reply::Ok(s)) if s == "hello"));
        assert!(matches!(read_reply(&mut r), Ok(Reply::Ok(s)) if s == "OK"));
        assert!(matches!(read_reply(&mut r), Ok(Reply::Error(s)) if s == "NOAUTH x"));
        assert!(read_reply(&mut r).is_err());
        assert!(read_reply(&mut BufReader::new(&b"$3\r\nab"[..])).is_err());
    }
}
