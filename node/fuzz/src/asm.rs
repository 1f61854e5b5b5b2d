//! Atomic slot migration: what clients and peers send (CLUSTER MIGRATESLOTS / SYNCSLOTS
//! tokens, a target's ESTABLISH reply) through the parsers, and arbitrary link messages,
//! ticks and events through the job state machines.

use tessera_cluster::asm::{self, machine, Job, JobLog, JobName, LinkMsg, SlotRange, SyncMsg};
use tessera_cluster::msg::Name;
use tessera_cluster::state::{ClusterState, Node, FLAG_MASTER};
use tessera_cluster::ClusterConfig;

use crate::Input;

const B: Name = *b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// A primary owning 0-8191 that knows B, the owner of 8192-16383.
fn state() -> ClusterState {
    let cfg = ClusterConfig {
        enabled: true,
        port: 7000,
        ..ClusterConfig::default()
    };
    let mut st = ClusterState::new(cfg, 1_000_000, 1);
    st.nodes.insert(B, Node::new(B, FLAG_MASTER, 0));
    let me = st.myself;
    for s in 0..16384 {
        st.add_slot(if s < 8192 { me } else { B }, s);
    }
    st
}

/// `data` as space/newline separated tokens through every parser, then the bytes as a
/// sequence of events driving an import and an export job. A finished job stays finished.
pub fn asm_link(data: &[u8]) {
    let tokens: Vec<&[u8]> = data.split(|b| *b == b' ' || *b == b'\n').collect();
    let st = state();
    let log = JobLog::new();
    let view = asm::StateView::new(&st, &log);
    let _ = asm::parse_migrateslots(&tokens, &view);
    let _ = asm::parse_establish(&tokens, &view, false);
    let _ = asm::parse_establish(&tokens, &view, true);
    for origin in [
        asm::Origin::Client,
        asm::Origin::Replication,
        asm::Origin::Migration,
    ] {
        let _ = asm::dispatch(&tokens, origin);
    }
    let _ = asm::wire::parse_establish_reply(data);

    let mut inp = Input::new(data);
    let name = JobName([b'a'; 40]);
    let ranges = vec![SlotRange { start: 0, end: 10 }];
    let mut jobs = [
        Job::new_import(name, ranges.clone(), B, st.myself, 1_000_000),
        Job::new_export(name, ranges, st.myself, B, 1_000_000),
    ];
    let mut now = 1_000_000u64;
    for _ in 0..64 {
        let pick = inp.u8();
        now += u64::from(inp.u8()) * 50;
        let mut ctx = machine::Ctx::new(now);
        ctx.is_primary = pick & 0x80 == 0;
        ctx.pause_active = pick & 0x40 == 0;
        ctx.reply_bytes = u64::from(inp.u8());
        for job in jobs.iter_mut() {
            let was_finished = job.is_finished();
            let _ = match pick % 12 {
                0..=5 => {
                    machine::on_message(job, LinkMsg::Sync(SyncMsg::ALL[pick as usize % 6]), &ctx)
                }
                6 => machine::on_message(job, LinkMsg::Capa, &ctx),
                7 => machine::on_message(job, LinkMsg::Unknown, &ctx),
                8 => machine::tick(job, &ctx),
                9 => machine::on_link_closed(job, &ctx),
                10 => machine::on_topology(job, Some(B), &st.myself, &ctx),
                _ => machine::cleanup_done(job, &ctx),
            };
            assert!(
                !was_finished || job.is_finished(),
                "a finished job came back: {job:?}"
            );
        }
    }
}
