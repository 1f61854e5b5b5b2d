//! DUMP, RESTORE, RESTORE-ASKING and MIGRATE (Redis 7.0 semantics and error texts).
//!
//! Payloads are `tessera_rdb`'s (RDB version 10, CRC-64/Jones), so they move both ways with
//! redis-server 7.0. MIGRATE talks to the target synchronously while holding the keys'
//! locks, as Redis blocks its event loop: the keys can't change half-way through.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;

use super::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx, KeyPos};
use crate::db::rdb as convert;
use crate::db::{Entry, NO_EXPIRE};
use crate::server::migrate_sockets::{CachedSocket, MigrateStream};

pub fn commands() -> Vec<CommandSpec> {
    let g = "generic";
    vec![
        CommandSpec::new("dump", 2, "readonly", (1, 1, 1), dump)
            .group(g)
            .since("2.6.0"),
        CommandSpec::new("restore", -4, "write denyoom", (1, 1, 1), restore)
            .group(g)
            .since("2.6.0"),
        CommandSpec::new("restore-asking", -4, "write denyoom", (1, 1, 1), restore)
            .group("server")
            .since("3.0.0"),
        CommandSpec::new("migrate", -6, "write", (3, 3, 1), migrate)
            .keys(KeyPos::Custom(migrate_keys))
            .group(g)
            .since("2.6.0"),
    ]
}

/// MIGRATE's keys as Redis 7.0 finds them: its key specs give argument 3 unless a `KEYS`
/// keyword turns up (searched backwards from the last-but-one argument), which makes the
/// incomplete spec fall back to migrateGetKeys. That one walks the options skipping AUTH's
/// password and AUTH2's user and password, so a password spelt `KEYS` is not the keyword.
fn migrate_keys(args: &[&[u8]], out: &mut Vec<usize>) {
    let n = args.len();
    if n < 6 {
        return;
    }
    if !(2..=n - 2).any(|i| eq_ic(args[i], "keys")) {
        out.push(3);
        return;
    }
    let (mut first, mut num) = (3, 1);
    let mut i = 6;
    while i < n {
        let a = args[i];
        if eq_ic(a, "keys") {
            if args[3].is_empty() {
                first = i + 1;
                num = n - first;
            } else {
                // A syntax error MIGRATE itself reports: no keys.
                num = 0;
            }
            break;
        }
        if eq_ic(a, "auth") {
            i += 1;
        } else if eq_ic(a, "auth2") {
            i += 2;
        }
        i += 1;
    }
    out.extend(first..first + num);
}

fn dump(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match ctx.ks.get(args[1]) {
        Some(v) => {
            let payload = tessera_rdb::dump_value(&convert::to_rdb(v));
            ctx.out.bulk(&payload);
        }
        None => ctx.out.null(),
    }
    Ok(())
}

fn restore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        let a = &args[j];
        if eq_ic(a, "replace") {
            replace = true;
        } else if eq_ic(a, "absttl") {
            absttl = true;
        } else if eq_ic(a, "idletime") && more >= 1 && freq.is_none() {
            let v = arg_i64(args[j + 1])?;
            if v < 0 {
                return Err(CmdError::msg("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            j += 1;
        } else if eq_ic(a, "freq") && more >= 1 && idle.is_none() {
            let v = arg_i64(args[j + 1])?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::msg(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let key = &args[1];
    if !replace && ctx.ks.exists(key) {
        return Err(CmdError::msg("BUSYKEY Target key name already exists."));
    }
    let ttl = arg_i64(args[2])?;
    if ttl < 0 {
        return Err(CmdError::msg("ERR Invalid TTL value, must be >= 0"));
    }
    // DEBUG SET-SKIP-CHECKSUM-VALIDATION 1: the payload's CRC64 is not compared.
    let check_crc = !ctx
        .srv
        .debug
        .skip_checksum_validation
        .load(std::sync::atomic::Ordering::Relaxed);
    let rv = tessera_rdb::restore_value_checked(args[3], tessera_rdb::RDB_VERSION, check_crc)
        .map_err(|e| {
            // Redis logs why it refused the payload (its tests grep these lines).
            if let tessera_rdb::RestoreError::BadData(why) = &e {
                tracing::warn!("RESTORE: {}", why.log_line());
            }
            CmdError::msg(e.to_string())
        })?;
    let lim = ctx.limits();
    let Some(value) = convert::from_rdb(rv, &lim) else {
        return Err(CmdError::msg("ERR Bad data format"));
    };
    let now = ctx.ks.now;
    let deleted = replace && ctx.ks.del(key);
    let expire_at = match ttl {
        0 => NO_EXPIRE,
        t if absttl => t as u64,
        t => now.saturating_add(t as u64),
    };
    if expire_at != NO_EXPIRE && expire_at <= now {
        // Already expired: Redis answers OK and (if REPLACE) the old key is gone, which is
        // all replicas get (DEL); otherwise nothing changed.
        if deleted {
            ctx.notify(crate::notify::GENERIC, "del", key);
            if ctx.propagating() {
                ctx.propagate_as(vec![
                    Bytes::from_static(b"DEL"),
                    Bytes::copy_from_slice(key),
                ]);
            }
        } else {
            ctx.unchanged();
        }
        ctx.out.ok();
        return Ok(());
    }
    let mut e = Entry::new(value);
    e.set_expire_at(expire_at);
    let srv = ctx.srv;
    let access = match (srv.lfu_enabled(), freq, idle) {
        (true, Some(f), _) => (crate::server::evict::lfu_new(now) & !0xff) | f as u32,
        (false, _, Some(i)) => idle_access(srv.access_clock(now), i),
        _ => srv.new_access(now),
    };
    e.set_access(access);
    let db = ctx.ks.db;
    ctx.ks.insert_in(db, key, e);
    ctx.notify(crate::notify::GENERIC, "restore", key);
    // A relative TTL reaches replicas and the AOF as the absolute deadline (ABSTTL).
    if ttl > 0 && !absttl && ctx.propagating() {
        let mut v: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        v[0] = Bytes::from_static(b"RESTORE");
        v[2] = super::keys::num(expire_at);
        v.push(Bytes::from_static(b"ABSTTL"));
        ctx.propagate_as(v);
    }
    ctx.ks.signal_ready(key);
    ctx.out.ok();
    Ok(())
}

/// The LRU word of a key restored with IDLETIME `idle_secs` (≥ 0, the peer's number),
/// counted back in the wrapping LRU clock (so an idle time longer than the uptime is kept,
/// as Redis keeps it). More than the clock can tell apart becomes half a clock ago, Redis's
/// choice when the idle time underflows its clock; no multiplication can overflow.
fn idle_access(clock: u32, idle_secs: i64) -> u32 {
    let mask = crate::db::value::ACCESS_MASK;
    let idle = u32::try_from(idle_secs).map_or(mask / 2, |i| i.min(mask / 2));
    clock.wrapping_sub(idle) & mask
}

/// Parsed MIGRATE arguments.
struct MigrateArgs<'a> {
    host: String,
    port: u16,
    db: i64,
    timeout_ms: u64,
    copy: bool,
    replace: bool,
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys: Vec<&'a [u8]>,
}

fn parse_migrate<'a>(args: &[&'a [u8]]) -> Result<MigrateArgs<'a>, CmdError> {
    let (mut copy, mut replace) = (false, false);
    let mut auth = None;
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut j = 6;
    let mut keys_opt = false;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = &args[j];
        if eq_ic(a, "copy") {
            copy = true;
        } else if eq_ic(a, "replace") {
            replace = true;
        } else if eq_ic(a, "auth") {
            if more == 0 {
                return Err(CmdError::Syntax);
            }
            j += 1;
            auth = Some((None, args[j]));
        } else if eq_ic(a, "auth2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            auth = Some((Some(args[j + 1]), args[j + 2]));
            j += 2;
        } else if eq_ic(a, "keys") {
            if !args[3].is_empty() {
                return Err(CmdError::msg(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            keys.extend(args[j + 1..].iter().map(|k| &k[..]));
            keys_opt = true;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let timeout = arg_i64(args[5])?;
    let db = arg_i64(args[4])?;
    if !keys_opt {
        keys.push(args[3]);
    }
    let port = std::str::from_utf8(args[2])
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(0);
    Ok(MigrateArgs {
        host: String::from_utf8_lossy(args[1]).into_owned(),
        port,
        db,
        timeout_ms: if timeout <= 0 { 1000 } else { timeout as u64 },
        copy,
        replace,
        auth,
        keys,
    })
}

fn bulk(buf: &mut Vec<u8>, b: &[u8]) {
    buf.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    buf.extend_from_slice(b);
    buf.extend_from_slice(b"\r\n");
}

fn command(buf: &mut Vec<u8>, parts: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
    for p in parts {
        bulk(buf, p);
    }
}

/// MIGRATE: pipelines [AUTH], SELECT (unless the cached connection has the database
/// selected already) and one RESTORE(-ASKING) per key, then deletes the keys the target
/// accepted (unless COPY). The connection stays cached for the next MIGRATE to the same
/// target (Redis's migrateGetSocket); a cached one found closed is replaced once.
fn migrate(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let m = parse_migrate(args)?;
    let now = ctx.ks.now;
    // (key, relative ttl ms or 0, payload) of the keys that exist and are not expired.
    let mut todo: Vec<(&[u8], u64, Vec<u8>)> = Vec::new();
    for k in &m.keys {
        if let Some(e) = ctx.ks.entry(k) {
            let ttl = match e.expire_at() {
                NO_EXPIRE => 0,
                at => at.saturating_sub(now).max(1),
            };
            let payload = tessera_rdb::dump_value(&convert::to_rdb(&e.value));
            todo.push((k, ttl, payload));
        }
    }
    if todo.is_empty() {
        ctx.unchanged();
        ctx.out.simple("NOKEY");
        return Ok(());
    }
    // The cache key is the host and port as the client wrote them (Redis's).
    let target = format!(
        "{}:{}",
        String::from_utf8_lossy(args[1]),
        String::from_utf8_lossy(args[2])
    );
    let timeout = Duration::from_millis(m.timeout_ms);
    let restore_cmd: &[u8] = if super::cluster_mode(ctx.srv) {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    let mut may_retry = true;
    loop {
        let cached = ctx.srv.migrate_sockets.take(&target);
        let reused = cached.is_some();
        let mut cs = match cached {
            Some(c) => c,
            None => match connect(ctx.srv, &m.host, m.port, timeout) {
                Ok(s) => CachedSocket::new(s),
                // Redis 7.0's blocking connect only waits for writability: a refused
                // connection surfaces as a write error, a silent host as a connect timeout.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Err(CmdError::msg(
                        "IOERR error or timeout writing to target instance",
                    ))
                }
                Err(_) => {
                    return Err(CmdError::msg(
                        "IOERR error or timeout connecting to the client",
                    ))
                }
            },
        };
        // A cached connection's timeouts are this call's.
        let _ = cs.stream.tcp().set_read_timeout(Some(timeout));
        let _ = cs.stream.tcp().set_write_timeout(Some(timeout));
        let mut moved = Vec::new();
        let r = exchange(ctx, &m, &mut cs, &todo, restore_cmd, &mut moved);
        propagate_moved(ctx, moved);
        match r {
            Ok(Done::Ok) => {
                cs.last_db = Some(m.db);
                ctx.srv.migrate_sockets.put(target, cs);
                ctx.out.ok();
                return Ok(());
            }
            Ok(Done::TargetError(e)) => {
                // Every reply was read: the connection stays usable, its database unknown.
                cs.last_db = None;
                ctx.srv.migrate_sockets.put(target, cs);
                return Err(CmdError::msg(format!(
                    "ERR Target instance replied with error: {e}"
                )));
            }
            Err(failed) => {
                // The connection is dropped (closed). A cached one that the target closed
                // meanwhile is worth one more try, if nothing was processed and it did not
                // time out (Redis's may_retry).
                drop(cs);
                if reused && may_retry && failed.retry_ok {
                    may_retry = false;
                    continue;
                }
                return Err(CmdError::msg(failed.reply));
            }
        }
    }
}

/// How a MIGRATE exchange that read all its replies ended.
enum Done {
    Ok,
    /// The first error the target answered (AUTH, SELECT or a RESTORE).
    TargetError(String),
}

/// A MIGRATE exchange that broke off: the reply, and whether a fresh connection may be
/// tried (nothing was processed and the failure was no timeout).
struct Failed {
    reply: String,
    retry_ok: bool,
}

/// Sends [AUTH], [SELECT] and the RESTOREs on `cs`, reads every reply and deletes the
/// keys the target took (unless COPY).
fn exchange(
    ctx: &mut Ctx<'_>,
    m: &MigrateArgs<'_>,
    cs: &mut CachedSocket,
    todo: &[(&[u8], u64, Vec<u8>)],
    restore_cmd: &[u8],
    moved: &mut Vec<Bytes>,
) -> Result<Done, Failed> {
    let select = cs.last_db != Some(m.db);
    let mut buf = Vec::new();
    if let Some((user, pw)) = m.auth {
        match user {
            Some(u) => command(&mut buf, &[b"AUTH", u, pw]),
            None => command(&mut buf, &[b"AUTH", pw]),
        }
    }
    if select {
        let dbs = m.db.to_string();
        command(&mut buf, &[b"SELECT", dbs.as_bytes()]);
    }
    for (k, ttl, payload) in todo {
        let ttl = ttl.to_string();
        let mut parts: Vec<&[u8]> = vec![restore_cmd, k, ttl.as_bytes(), payload];
        if m.replace {
            parts.push(b"REPLACE");
        }
        command(&mut buf, &parts);
    }
    if let Err(e) = cs.stream.write_all(&buf).and_then(|_| cs.stream.flush()) {
        return Err(Failed {
            reply: "IOERR error or timeout writing to target instance".into(),
            retry_ok: !timed_out(&e),
        });
    }
    // Every byte the target sends is a reply this call reads: nothing is left buffered.
    let mut rd = BufReader::new(&mut cs.stream);
    let io_read = |e: std::io::Error, first: bool| Failed {
        reply: "IOERR error or timeout reading to target instance".into(),
        retry_ok: first && !timed_out(&e),
    };
    let mut target_err: Option<String> = None;
    let preamble = usize::from(m.auth.is_some()) + usize::from(select);
    for _ in 0..preamble {
        let line = read_line(&mut rd).map_err(|e| io_read(e, true))?;
        if let Some(err) = line.strip_prefix('-') {
            target_err.get_or_insert_with(|| err.to_string());
        }
    }
    // A refused AUTH or SELECT: no key counts as moved (Redis reads every reply anyway).
    let preamble_ok = target_err.is_none();
    for (j, (k, _, _)) in todo.iter().enumerate() {
        let line = read_line(&mut rd).map_err(|e| io_read(e, j == 0))?;
        if let Some(err) = line.strip_prefix('-') {
            target_err.get_or_insert_with(|| err.to_string());
        } else if preamble_ok && !m.copy && ctx.ks.del(k) {
            ctx.notify(crate::notify::GENERIC, "del", k);
            moved.push(Bytes::copy_from_slice(k));
        }
    }
    Ok(match target_err {
        Some(e) => Done::TargetError(e),
        None => Done::Ok,
    })
}

/// Replicas and the AOF get MIGRATE as DEL of the keys the target took, as Redis 7.0
/// rewrites it; nothing when none moved (COPY, or every RESTORE refused). Replaying the
/// MIGRATE itself would find the key still here (the target answers BUSYKEY).
fn propagate_moved(ctx: &mut Ctx<'_>, moved: Vec<Bytes>) {
    if moved.is_empty() {
        // NOKEY-like: COPY, or nothing taken; no change, nothing to propagate.
        ctx.unchanged();
        return;
    }
    let mut argv = Vec::with_capacity(moved.len() + 1);
    argv.push(Bytes::from_static(b"DEL"));
    argv.extend(moved);
    ctx.propagate_as(argv);
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

/// Connects to the target: over TLS when the cluster bus is (tls-cluster), as Redis 7.0
/// does; the handshake happens with the first write, under the call's timeouts.
fn connect(
    srv: &crate::server::Server,
    host: &str,
    port: u16,
    timeout: Duration,
) -> std::io::Result<MigrateStream> {
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let tls = {
        let c = srv.config.read();
        if c.typed.tls_cluster {
            Some(crate::server::tls::client_config(&c).map_err(std::io::Error::other)?)
        } else {
            None
        }
    };
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    let _ = s.set_nodelay(true);
    let Some(cfg) = tls else {
        return Ok(MigrateStream::Plain(s));
    };
    // The name is not checked (the chain is, as Redis does); sent as SNI when it is one.
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .or_else(|_| rustls::pki_types::ServerName::try_from("localhost"))
        .map_err(std::io::Error::other)?;
    let conn = rustls::ClientConnection::new(cfg, name).map_err(std::io::Error::other)?;
    Ok(MigrateStream::Tls(Box::new(rustls::StreamOwned::new(
        conn, s,
    ))))
}

/// One reply line without CRLF (every reply MIGRATE waits for is a status or an error);
/// a closed connection or a line cut short is an error.
fn read_line(rd: &mut impl BufRead) -> std::io::Result<String> {
    let mut line = Vec::new();
    let n = rd.read_until(b'\n', &mut line)?;
    if n == 0 || !line.ends_with(b"\r\n") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "target closed the connection",
        ));
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}
