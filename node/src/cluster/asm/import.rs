//! The target's import link: the source's connection after a successful
//! `CLUSTER SYNCSLOTS ESTABLISH`. It carries the snapshot of the slots as write commands,
//! then the live stream of the source's writes to them, then the hand-off messages. Like a
//! replica's master link it gets no replies and is never redirected (it writes slots this
//! node does not own yet); unlike it, what it applies is propagated to our own replicas and
//! AOF as our writes. The only bytes sent back are SYNCSLOTS messages (ACK, REQUEST-PAUSE,
//! REQUEST-FAILOVER).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tessera_cluster::asm::{self, Effect, JobName, LinkMsg};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cmd::{self, Outcome};
use crate::repl::decoder::{DecodeError, Decoder, Event, StreamLimits};
use crate::resp::{recycle_view, Out};
use crate::server::unix::ClientStream;
use crate::server::{now_ms, ClientState, Server};

/// How often the link runs the job's cron (timeouts, ACKs, the take-over retry).
const TICK: Duration = Duration::from_millis(100);

/// Serves the import link of job `name` until the job ends or the link drops. `out` holds
/// the +OK of ESTABLISH; `inbuf` what the source sent after it.
pub async fn serve(
    srv: &Arc<Server>,
    sock: &mut ClientStream,
    cl: &mut ClientState,
    out: &mut Out,
    inbuf: &mut BytesMut,
    name: JobName,
) -> std::io::Result<()> {
    // The link's replies are read back as one buffer (`run`) from here on.
    out.flatten();
    out.shares = false;
    if !out.buf.is_empty() {
        sock.write_all(&out.buf).await?;
        out.buf.clear();
    }
    cl.slot_import = true;
    let limits = {
        let c = srv.config.read();
        StreamLimits::new(
            c.typed.proto_max_bulk_len,
            c.typed.client_query_buffer_limit,
        )
    };
    let mut dec = Decoder::stream(limits);
    dec.feed(inbuf);
    inbuf.clear();
    let mut store: Vec<&'static [u8]> = Vec::with_capacity(8);
    let mut held: Option<(Vec<Bytes>, std::time::Instant)> = None;
    // A FLUSHDB/FLUSHALL fails the import (Valkey's "Data was flushed").
    let flushes = srv.ks.flushes.load(Ordering::Acquire);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = loop {
        if srv.ks.flushes.load(Ordering::Acquire) != flushes {
            fail(srv, &name, asm::DATA_FLUSHED);
            break Ok(());
        }
        let (send, retry) = match apply(srv, cl, out, &mut dec, &mut store, &name, &mut held) {
            Ok(r) => r,
            Err(msg) => {
                fail(srv, &name, msg);
                break Ok(());
            }
        };
        if !send.is_empty() {
            if let Err(e) = sock.write_all(&send).await {
                break Err(e);
            }
        }
        if !in_progress(srv, &name) {
            break Ok(());
        }
        let wait_held = async {
            match retry {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = cl.handle.kill.notified() => break Ok(()),
            _ = srv.asm.changed.notified() => {}
            _ = wait_held => {}
            n = sock.read_buf(dec.read_space()) => match n {
                Ok(0) => break Ok(()),
                Ok(_) => note_recv(srv, &name),
                Err(e) => break Err(e),
            },
            _ = tick.tick() => {
                let send = cron(srv, &name);
                if !send.is_empty() {
                    if let Err(e) = sock.write_all(&send).await {
                        break Err(e);
                    }
                }
            }
        }
    };
    cl.slot_import = false;
    link_closed(srv, &name);
    result
}

fn in_progress(srv: &Server, name: &JobName) -> bool {
    srv.asm
        .log
        .lock()
        .get(name)
        .is_some_and(|j| j.is_in_progress() && !j.is_tracking_only())
}

fn note_recv(srv: &Server, name: &JobName) {
    if let Some(j) = srv.asm.log.lock().get_mut(name) {
        j.note_recv(now_ms());
    }
}

/// Runs `f` on the job with the machine's facts, then performs what it asked for; returns
/// the bytes to send on the link.
fn step(
    srv: &Server,
    name: &JobName,
    f: impl FnOnce(&mut asm::Job, &asm::Ctx, Option<tessera_cluster::msg::Name>) -> Vec<Effect>,
) -> Vec<u8> {
    let Some(node) = crate::cluster::node(srv) else {
        return Vec::new();
    };
    // The slot table's owner of the job's ranges, read before the log is locked.
    let ranges = match srv.asm.log.lock().get(name) {
        Some(j) => j.ranges.clone(),
        None => return Vec::new(),
    };
    let (primary, owner) = node.with_state(|st| {
        let owner = asm::ranges_owner(&ranges, |s| st.slots.get(s as usize).copied().flatten());
        (st.me().is_master(), owner)
    });
    let ctx = super::machine_ctx(srv, primary);
    let fx = match srv.asm.log.lock().get_mut(name) {
        Some(job) => f(job, &ctx, owner),
        None => return Vec::new(),
    };
    super::run_effects(srv, name, fx)
}

/// The job's cron: the source must still own the slots, then timeouts and ACKs.
fn cron(srv: &Server, name: &JobName) -> Vec<u8> {
    let me = crate::cluster::node(srv).map(|n| n.with_state(|st| st.myself));
    step(srv, name, |job, ctx, owner| {
        let mut fx = match me {
            Some(me) => asm::machine::on_topology(job, owner, &me, ctx),
            None => Vec::new(),
        };
        fx.extend(asm::machine::tick(job, ctx));
        fx
    })
}

fn fail(srv: &Server, name: &JobName, msg: &str) {
    tracing::warn!(job = %name.to_str_lossy(), reason = msg, "slot migration: import failed");
    step(srv, name, |job, ctx, _| {
        asm::machine::fail_if_in_progress(job, msg, ctx)
    });
}

fn link_closed(srv: &Server, name: &JobName) {
    step(srv, name, |job, ctx, _| {
        asm::machine::on_link_closed(job, ctx)
    });
}

fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Applies every complete command the decoder holds (a command held by CLIENT PAUSE
/// first). Returns the SYNCSLOTS messages to send and, while a command is held, when to
/// retry it; `Err` fails the job with that message.
fn apply(
    srv: &Arc<Server>,
    cl: &mut ClientState,
    out: &mut Out,
    dec: &mut Decoder,
    store: &mut Vec<&'static [u8]>,
    name: &JobName,
    held: &mut Option<(Vec<Bytes>, std::time::Instant)>,
) -> Result<(Vec<u8>, Option<std::time::Instant>), &'static str> {
    let mut send = Vec::new();
    if let Some((args, _)) = held.take() {
        let view = crate::resp::arg_view(&args);
        if let Some(until) = execute(srv, cl, out, &view)? {
            *held = Some((args, until));
            return Ok((send, Some(until)));
        }
    }
    loop {
        if !in_progress(srv, name) {
            return Ok((send, None));
        }
        let mut args = recycle_view(std::mem::take(store));
        match dec.next(&mut args) {
            Ok(Some(Event::Command { .. })) => {}
            Ok(None) => {
                *store = recycle_view(args);
                return Ok((send, None));
            }
            Ok(Some(_)) => return Err(asm::UNEXPECTED_TRANSITION),
            Err(DecodeError::Inline) => return Err(asm::INLINE_ON_IMPORT),
            Err(e) => {
                tracing::warn!(error = %e, "slot migration: bad bytes on the import link");
                return Err(asm::CONN_LOST_TO_SOURCE);
            }
        }
        if args.is_empty() {
            *store = recycle_view(args);
            continue;
        }
        if args.len() >= 3 && eq_ic(args[0], "cluster") && eq_ic(args[1], "syncslots") {
            let msg = match asm::dispatch(&args[2..], asm::Origin::Migration) {
                asm::Dispatch::Link(m) => m,
                _ => LinkMsg::Unknown,
            };
            *store = recycle_view(args);
            send.extend(step(srv, name, |job, ctx, _| {
                asm::machine::on_message(job, msg, ctx)
            }));
            continue;
        }
        let until = execute(srv, cl, out, &args)?;
        if let Some(until) = until {
            *held = Some((crate::resp::owned_args(&args), until));
            *store = recycle_view(args);
            return Ok((send, Some(until)));
        }
        *store = recycle_view(args);
    }
}

/// Runs one command of the import stream; its reply is dropped, but an error fails the
/// job (the target's copy would differ from the source's). `Ok(Some(t))`: CLIENT PAUSE
/// holds it until `t`, nothing ran.
fn execute(
    srv: &Arc<Server>,
    cl: &mut ClientState,
    out: &mut Out,
    args: &[&[u8]],
) -> Result<Option<std::time::Instant>, &'static str> {
    match cmd::execute(srv, cl, out, args) {
        Outcome::Paused(until) => {
            cl.now_ms = 0;
            out.buf.clear();
            return Ok(Some(until));
        }
        Outcome::Blocked(w) => {
            srv.blocking.cancel(w.id);
        }
        Outcome::Done | Outcome::Close => {}
    }
    cl.now_ms = 0;
    cl.pending = None;
    let failed = out.buf.first() == Some(&b'-');
    let oom = out.buf.starts_with(b"-OOM");
    if failed {
        let end = out.buf.len().min(200);
        tracing::warn!(
            reply = %String::from_utf8_lossy(&out.buf[..end]).trim_end(),
            command = %String::from_utf8_lossy(args[0]),
            "slot migration: a command of the import stream failed"
        );
    }
    out.buf.clear();
    if oom {
        return Err(asm::IMPORT_OOM);
    }
    if failed {
        return Err(asm::COMMAND_FAILED);
    }
    Ok(None)
}
