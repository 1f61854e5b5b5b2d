//! `tessera-node --ready-probe [port]`: the readiness check of a node pod. The node image has no
//! shell and no redis-cli, so the binary checks itself, as `redis-cli INFO` plus a test would.
//!
//! Ready means: the node answers INFO on `$POD_IP` (else 127.0.0.1), is not loading its
//! dataset, and, when it is a replica, its link to its master is up. The password comes from
//! `REDISCLI_AUTH`, as for redis-cli. A node that refuses that password (changed live by the
//! operator since the pod started) is judged on answering alone, as a TCP probe would: the
//! password is the operator's business, and unreadying every pod on a rotation would be worse.
//! When the pod names the operator's own user (`TESSERA_OPERATOR_USER` and
//! `TESSERA_OPERATOR_PASSWORD`), the probe logs in as that user first, so a node whose
//! `default` user is off is still judged on its INFO.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Bound on connecting, and on each read and write (the kubelet's own timeout is longer).
const TIMEOUT: Duration = Duration::from_secs(2);
/// Largest INFO reply accepted.
const MAX_REPLY: usize = 1 << 20;
/// Port when none is given.
const DEFAULT_PORT: u16 = 6379;

/// Why the node is not ready (or could not be asked).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot reach the node: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Protocol(String),
    #[error("not ready: {0}")]
    NotReady(&'static str),
}

/// Runs the probe; returns the process exit code (0 ready, 1 not).
pub fn run(args: &[String]) -> i32 {
    let port = match args.first().map(|p| p.parse::<u16>()) {
        None => DEFAULT_PORT,
        Some(Ok(p)) => p,
        Some(Err(_)) => {
            println!("usage: tessera-node --ready-probe [port]");
            return 2;
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
    match check(&host, port, admin, password.as_deref()) {
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
    admin: Option<(&str, &str)>,
    password: Option<&str>,
) -> Result<&'static str, ProbeError> {
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| ProbeError::Protocol(format!("{host} has no address")))?;
    let stream = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut logged_in = false;
    if let Some((user, pw)) = admin {
        writer.write_all(&command(&["AUTH", user, pw]))?;
        // A node started before the user existed refuses it: the password below may do.
        logged_in = matches!(read_reply(&mut reader)?, Reply::Ok(_));
    }
    if let Some(pw) = password.filter(|_| !logged_in) {
        writer.write_all(&command(&["AUTH", pw]))?;
        // A refused password is not fatal: INFO below tells whether the node needs one.
        read_reply(&mut reader)?;
    }
    writer.write_all(&command(&["INFO"]))?;
    match read_reply(&mut reader)? {
        Reply::Ok(info) => verdict(&info),
        Reply::Error(e) if e.starts_with("NOAUTH") => {
            Ok("answering (cannot log in to see more; the password changed?)")
        }
        Reply::Error(e) => Err(ProbeError::Protocol(format!("INFO: {e}"))),
    }
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
