//! Slot migration with Valkey 9's atomic protocol (`CLUSTER MIGRATESLOTS`), which
//! tessera-node and valkey-server 9 speak: the source streams the slots to the target and
//! hands them over at once, with no ASK window and no per-key round trips. Used when the
//! source and every target of a batch support it (probed with COMMAND INFO); the key-by-key
//! path (`migrate.rs`) remains for redis-server and for whatever an atomic job failed.
//!
//! Resumable: jobs live on the source. A pass that finds exports already running there (an
//! operator restarted mid-move) waits for them and leaves the slots to the next pass, which
//! plans from the slot table they left.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::conn::{cluster, value_text, NodeConn};
use super::plan::NodeRef;
use super::TopologyError;

/// How often a running job is polled.
const POLL: Duration = Duration::from_millis(10);

/// One entry of `CLUSTER GETSLOTMIGRATIONS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Job {
    pub name: String,
    pub operation: String,
    pub state: String,
    pub message: String,
    pub target: String,
}

impl Job {
    fn finished(&self) -> bool {
        matches!(self.state.as_str(), "success" | "failed" | "cancelled")
    }
}

/// What one source's atomic moves came to.
#[derive(Debug, Default)]
pub struct Moved {
    /// (target pod, slots) that moved.
    pub done: Vec<(String, Vec<u16>)>,
    /// Slots left for the key-by-key path (their job failed), with why.
    pub failed: Vec<(NodeRef, Vec<u16>, String)>,
    /// Slots left for the next pass: jobs started earlier, or still running at the
    /// deadline.
    pub later: usize,
}

/// True when the node knows `CLUSTER <sub>` (COMMAND INFO answers nil for unknown ones).
async fn knows(conn: &mut NodeConn, sub: &str) -> bool {
    let v: Result<Value, _> = conn
        .run(
            redis::cmd("COMMAND")
                .arg("INFO")
                .arg(format!("cluster|{sub}")),
        )
        .await;
    match v {
        Ok(Value::Array(items)) => items.first().is_some_and(|i| !matches!(i, Value::Nil)),
        _ => false,
    }
}

/// The source can export and the target can import atomically.
pub async fn supported(src: &mut NodeConn, targets: &mut [NodeConn]) -> bool {
    if !knows(src, "migrateslots").await {
        return false;
    }
    for t in targets.iter_mut() {
        if !knows(t, "syncslots").await {
            return false;
        }
    }
    true
}

/// The node's migration jobs, newest first (RESP2 flat pairs or RESP3 maps).
pub async fn jobs(conn: &mut NodeConn) -> Result<Vec<Job>, TopologyError> {
    let v: Value = conn.run(&cluster("GETSLOTMIGRATIONS")).await?;
    Ok(parse_jobs(&v))
}

fn parse_jobs(v: &Value) -> Vec<Job> {
    let Value::Array(items) = v else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| {
            let pairs: Vec<(String, String)> = match item {
                Value::Array(flat) => flat
                    .chunks(2)
                    .filter_map(|p| Some((value_text(p.first()?)?, field_text(p.get(1)?))))
                    .collect(),
                Value::Map(m) => m
                    .iter()
                    .filter_map(|(k, v)| Some((value_text(k)?, field_text(v))))
                    .collect(),
                _ => Vec::new(),
            };
            let mut j = Job::default();
            for (k, v) in pairs {
                match k.as_str() {
                    "name" => j.name = v,
                    "operation" => j.operation = v,
                    "state" => j.state = v,
                    "message" => j.message = v,
                    "target_node" => j.target = v,
                    _ => {}
                }
            }
            j
        })
        .collect()
}

fn field_text(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        other => value_text(other).unwrap_or_default(),
    }
}

/// Moves `groups` ((target, slots) owned by `from`) with one MIGRATESLOTS and waits for
/// every job until `deadline`.
pub async fn migrate(
    from: &NodeRef,
    src: &mut NodeConn,
    groups: &[(NodeRef, Vec<u16>)],
    deadline: Instant,
) -> Result<Moved, TopologyError> {
    let mut out = Moved::default();
    let before = jobs(src).await?;
    if before
        .iter()
        .any(|j| j.operation == "EXPORT" && !j.finished())
    {
        // Started by an earlier pass (or another operator instance): let it end, then plan
        // again from the slot table it leaves.
        info!(node = %from.pod, "slot migrations already running there; waiting for them");
        wait(src, &HashSet::new(), deadline).await?;
        out.later = groups.iter().map(|(_, s)| s.len()).sum();
        return Ok(out);
    }
    let known: HashSet<String> = before.into_iter().map(|j| j.name).collect();
    let mut cmd = cluster("MIGRATESLOTS");
    for (to, slots) in groups {
        cmd.arg("SLOTSRANGE");
        for (a, b) in super::nodes::to_ranges(slots.iter().copied()) {
            cmd.arg(a).arg(b);
        }
        cmd.arg("NODE").arg(&to.id);
    }
    src.run::<()>(&cmd).await?;
    let started = Instant::now();
    let finished = wait(src, &known, deadline).await?;
    let by_target: HashMap<&str, &Job> = finished.iter().map(|j| (j.target.as_str(), j)).collect();
    for (to, slots) in groups {
        match by_target.get(to.id.as_str()) {
            Some(j) if j.state == "success" => out.done.push((to.pod.clone(), slots.clone())),
            Some(j) if j.finished() => {
                warn!(from = %from.pod, to = %to.pod, state = %j.state, message = %j.message, "atomic slot migration failed; moving the keys one by one");
                out.failed.push((
                    to.clone(),
                    slots.clone(),
                    format!("{}: {}", j.state, j.message),
                ));
            }
            _ => out.later += slots.len(),
        }
    }
    debug!(from = %from.pod, took = ?started.elapsed(), "atomic slot migrations done");
    Ok(out)
}

/// Polls until every export not in `known` has finished (all exports when `known` is
/// empty), or the deadline; returns the new exports as last seen.
async fn wait(
    src: &mut NodeConn,
    known: &HashSet<String>,
    deadline: Instant,
) -> Result<Vec<Job>, TopologyError> {
    loop {
        let mine: Vec<Job> = jobs(src)
            .await?
            .into_iter()
            .filter(|j| j.operation == "EXPORT" && !known.contains(&j.name))
            .collect();
        if mine.iter().all(Job::finished) || Instant::now() >= deadline {
            return Ok(mine);
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// GETSLOTMIGRATIONS as RESP2 (flat pairs) and RESP3 (maps) read alike.
    #[test]
    fn parses_both_protocols() {
        let fields = [
            ("name", bulk("n1")),
            ("operation", bulk("EXPORT")),
            ("slot_ranges", bulk("0-10")),
            ("target_node", bulk("t1")),
            ("create_time", Value::Int(5)),
            ("state", bulk("success")),
            ("message", bulk("")),
        ];
        let flat = Value::Array(vec![Value::Array(
            fields
                .iter()
                .flat_map(|(k, v)| [bulk(k), v.clone()])
                .collect(),
        )]);
        let map = Value::Array(vec![Value::Map(
            fields.iter().map(|(k, v)| (bulk(k), v.clone())).collect(),
        )]);
        let want = vec![Job {
            name: "n1".into(),
            operation: "EXPORT".into(),
            state: "success".into(),
            message: String::new(),
            target: "t1".into(),
        }];
        assert_eq!(parse_jobs(&flat), want);
        assert_eq!(parse_jobs(&map), want);
        assert!(want[0].finished());
        assert_eq!(parse_jobs(&Value::Nil), vec![]);
    }
}
