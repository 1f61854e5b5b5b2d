//! Replication commands: REPLICAOF / SLAVEOF, ROLE, SYNC, PSYNC, REPLCONF, WAIT, FAILOVER.
//!
//! SYNC, PSYNC and WAIT need the connection itself (it becomes a replica link, or waits for
//! ACKs): their handlers leave a [`crate::repl::Pending`] that the connection runs next.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::{arg_i64, eq_ic, CmdError, CmdResult, CommandSpec, Ctx};
use crate::repl::{self, Pending};

pub fn commands() -> Vec<CommandSpec> {
    let none = (0, 0, 0);
    let g = "server";
    vec![
        CommandSpec::new("replicaof", 3, "admin noscript stale", none, replicaof).group(g),
        CommandSpec::new("slaveof", 3, "admin noscript stale", none, replicaof).group(g),
        CommandSpec::new("role", 1, "noscript loading stale fast", none, role).group(g),
        CommandSpec::new("sync", 1, "admin noscript no_multi", none, sync).group(g),
        CommandSpec::new("psync", -3, "admin noscript no_multi", none, psync).group(g),
        CommandSpec::new(
            "replconf",
            -1,
            "admin noscript loading stale allow_busy",
            none,
            replconf,
        )
        .group(g),
        CommandSpec::new("wait", 3, "noscript", none, wait).group("generic"),
        CommandSpec::new(
            "failover",
            -1,
            "admin noscript stale",
            none,
            repl::failover::command,
        )
        .group(g),
    ]
}

fn replicaof(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.srv.cluster.get().is_some() {
        return Err(CmdError::msg("ERR REPLICAOF not allowed in cluster mode."));
    }
    if eq_ic(args[1], "no") && eq_ic(args[2], "one") {
        repl::set_master(ctx.srv, None);
        // The master's oom-score-adj value again (as Redis's replicaofCommand).
        let _ = ctx.srv.oom.apply_for(ctx.srv);
        ctx.out.ok();
        return Ok(());
    }
    let port = arg_i64(args[2])?;
    if !(0..=65535).contains(&port) {
        return Err(CmdError::msg("ERR Invalid master port"));
    }
    let host = String::from_utf8_lossy(args[1]).into_owned();
    let same = ctx
        .srv
        .repl
        .master
        .lock()
        .as_ref()
        .is_some_and(|m| m.host.eq_ignore_ascii_case(&host) && m.port == port as u16);
    if same {
        ctx.out.simple("OK Already connected to specified master");
        return Ok(());
    }
    repl::set_master(ctx.srv, Some((host, port as u16)));
    let _ = ctx.srv.oom.apply_for(ctx.srv);
    ctx.out.ok();
    Ok(())
}

fn role(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let r = &ctx.srv.repl;
    let master = r.master.lock().as_ref().map(|m| (m.host.clone(), m.port));
    let sh = r.shared.lock();
    match master {
        Some((host, port)) => {
            let state = if r.link_up.load(Ordering::Relaxed) {
                "connected"
            } else if r.sync_in_progress.load(Ordering::Relaxed) {
                "sync"
            } else if r.handshake.load(Ordering::Relaxed) {
                "handshake"
            } else {
                "connecting"
            };
            let off = if r.link_up.load(Ordering::Relaxed) {
                sh.offset as i64
            } else {
                -1
            };
            ctx.out.array(5);
            ctx.out.bulk(b"slave");
            ctx.out.bulk(host.as_bytes());
            ctx.out.int(port as i64);
            ctx.out.bulk(state.as_bytes());
            ctx.out.int(off);
        }
        None => {
            ctx.out.array(3);
            ctx.out.bulk(b"master");
            ctx.out.int(sh.offset as i64);
            let online: Vec<_> = sh
                .replicas
                .iter()
                .filter(|x| x.state.load(Ordering::Relaxed) == repl::master::STATE_ONLINE)
                .collect();
            ctx.out.array(online.len());
            for x in online {
                ctx.out.array(3);
                ctx.out.bulk(x.ip.as_bytes());
                ctx.out
                    .bulk(x.port.load(Ordering::Relaxed).to_string().as_bytes());
                ctx.out
                    .bulk(x.ack_offset.load(Ordering::Relaxed).to_string().as_bytes());
            }
        }
    }
    Ok(())
}

fn sync(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    ctx.cl.pending = Some(Pending::Sync { psync: None });
    Ok(())
}

fn psync(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // FAILOVER from our master: we become a master before answering (repl::failover).
    if args.len() > 3 && eq_ic(args[3], "failover") {
        let from = ctx.cl.handle.addr.clone();
        repl::failover::on_psync_failover(ctx.srv, args[1], &from).map_err(CmdError::msg)?;
    }
    // Redis 7.0's syncCommand refuses an offset that is not an integer (it used to start
    // a full sync and answer an error too).
    if let Err(e) = arg_i64(args[2]) {
        tracing::warn!(
            "Replica {} asks for synchronization but with a wrong offset",
            ctx.cl.handle.addr
        );
        return Err(e);
    }
    ctx.cl.pending = Some(Pending::Sync {
        psync: Some((
            Bytes::copy_from_slice(args[1]),
            Bytes::copy_from_slice(args[2]),
        )),
    });
    Ok(())
}

fn replconf(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let id = ctx.cl.id;
    let mut i = 1;
    while i + 1 < args.len() {
        let (k, v) = (&args[i], &args[i + 1]);
        if eq_ic(k, "listening-port") {
            let p = arg_i64(v)?;
            repl::master::note_handshake(ctx.srv, id, |h| h.listening_port = p as u16);
        } else if eq_ic(k, "ip-address") {
            let ip = String::from_utf8_lossy(v).into_owned();
            repl::master::note_handshake(ctx.srv, id, |h| h.ip = Some(ip));
        } else if eq_ic(k, "ack") || eq_ic(k, "getack") {
            // Only meaningful on a replication link (handled there); never answered.
            return Ok(());
        } else if eq_ic(k, "rdb-filter-only") {
            let f = repl::master::RdbFilter::parse(v).map_err(|w| {
                CmdError::msg(format!("ERR Unsupported rdb-filter-only option: {w}"))
            })?;
            repl::master::note_handshake(ctx.srv, id, |h| h.rdb_filter = f);
        } else if eq_ic(k, "capa") || eq_ic(k, "rdb-only") || eq_ic(k, "version") {
            // (`version`: sent by newer valkey replicas.)
            // We always send the `$<len>` form, understood by every replica.
        } else {
            return Err(CmdError::msg(format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(k)
            )));
        }
        i += 2;
    }
    ctx.out.ok();
    Ok(())
}

fn wait(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.srv.repl.is_replica() {
        return Err(CmdError::msg("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let n = arg_i64(args[1])?;
    let t = arg_i64(args[2])
        .map_err(|_| CmdError::msg("ERR timeout is not an integer or out of range"))?;
    if t < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let offset = ctx.srv.repl.shared.lock().offset;
    if ctx.in_exec || n <= 0 {
        ctx.out.int(repl::master::acked(ctx.srv, offset) as i64);
        return Ok(());
    }
    ctx.cl.pending = Some(Pending::Wait {
        numreplicas: n as usize,
        timeout_ms: t as u64,
        offset,
    });
    Ok(())
}
