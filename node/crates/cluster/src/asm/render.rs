//! The `CLUSTER GETSLOTMIGRATIONS` reply (spec §2.3), in Valkey 9.1.0's shape.

use super::job::{Job, JobLog, Operation};
use crate::reply::Reply;

fn int(v: u64) -> Reply {
    Reply::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

fn field(name: &str, value: Reply) -> (Reply, Reply) {
    (Reply::bulk(name), value)
}

/// One job as a map: 12 fields, or 10 for tracking-only jobs (no `target_node` /
/// `source_node`). `remaining_repl_size` (new in 9.1.0) is 0 for imports.
pub fn render_job(job: &Job) -> Reply {
    let mut m = Vec::with_capacity(12);
    m.push(field("name", Reply::bulk(job.name.as_bytes())));
    m.push(field("operation", Reply::bulk(job.operation().as_str())));
    m.push(field("slot_ranges", Reply::bulk(job.slot_ranges_str())));
    if let (Some(target), Some(source)) = (job.target_node, job.source_node) {
        m.push(field("target_node", Reply::bulk(target)));
        m.push(field("source_node", Reply::bulk(source)));
    }
    m.push(field("create_time", int(job.create_time)));
    m.push(field("last_update_time", int(job.last_update_time)));
    m.push(field("last_ack_time", int(job.last_ack_time)));
    m.push(field("state", Reply::bulk(job.state.as_str())));
    m.push(field("message", Reply::bulk(&job.message)));
    m.push(field("cow_size", int(job.cow_size)));
    let remaining = match job.operation() {
        Operation::Export => job.remaining_repl_size,
        Operation::Import => 0,
    };
    m.push(field("remaining_repl_size", int(remaining)));
    Reply::Map(m)
}

/// Every job, newest first, one map each (the node flattens maps in RESP2).
pub fn render(log: &JobLog) -> Reply {
    Reply::Array(log.iter().map(render_job).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::job::{JobName, SlotRange};

    fn keys(r: &Reply) -> Vec<String> {
        match r {
            Reply::Map(m) => m
                .iter()
                .map(|(k, _)| match k {
                    Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect(),
            other => panic!("not a map: {other:?}"),
        }
    }

    #[test]
    fn field_order_and_lengths() {
        let mut log = JobLog::new();
        let mut ex = Job::new_export(
            JobName([b'1'; 40]),
            vec![
                SlotRange {
                    start: 16383,
                    end: 16383,
                },
                SlotRange { start: 0, end: 2 },
            ],
            [b's'; 40],
            [b't'; 40],
            1_700_000_000_500,
        );
        ex.remaining_repl_size = 77;
        ex.cow_size = 5;
        log.push_new(ex);
        let mut tr =
            Job::new_tracking(JobName([b'2'; 40]), vec![SlotRange { start: 1, end: 1 }], 0);
        tr.remaining_repl_size = 9;
        log.push_new(tr);

        let Reply::Array(items) = render(&log) else {
            panic!("not an array")
        };
        assert_eq!(items.len(), 2);
        // Newest first: the tracking job.
        assert_eq!(
            keys(&items[0]),
            [
                "name",
                "operation",
                "slot_ranges",
                "create_time",
                "last_update_time",
                "last_ack_time",
                "state",
                "message",
                "cow_size",
                "remaining_repl_size"
            ]
        );
        assert_eq!(
            keys(&items[1]),
            [
                "name",
                "operation",
                "slot_ranges",
                "target_node",
                "source_node",
                "create_time",
                "last_update_time",
                "last_ack_time",
                "state",
                "message",
                "cow_size",
                "remaining_repl_size"
            ]
        );
        let Reply::Map(ex) = &items[1] else {
            panic!("map")
        };
        let vals: Vec<&Reply> = ex.iter().map(|(_, v)| v).collect();
        assert_eq!(*vals[0], Reply::bulk([b'1'; 40]));
        assert_eq!(*vals[1], Reply::bulk("EXPORT"));
        assert_eq!(*vals[2], Reply::bulk("16383-16383 0-2"));
        assert_eq!(*vals[3], Reply::bulk([b't'; 40]));
        assert_eq!(*vals[4], Reply::bulk([b's'; 40]));
        assert_eq!(*vals[5], Reply::Int(1_700_000_000));
        assert_eq!(*vals[7], Reply::Int(1_700_000_000));
        assert_eq!(*vals[8], Reply::bulk("connecting"));
        assert_eq!(*vals[9], Reply::bulk(""));
        assert_eq!(*vals[10], Reply::Int(5));
        assert_eq!(*vals[11], Reply::Int(77));
        let Reply::Map(tr) = &items[0] else {
            panic!("map")
        };
        assert_eq!(tr[1].1, Reply::bulk("IMPORT"));
        assert_eq!(tr[6].1, Reply::bulk("occurring-on-primary"));
        assert_eq!(tr[9].1, Reply::Int(0), "imports show no remaining bytes");

        // RESP2: each map is a flat array of 24 / 20 elements.
        let mut out = Vec::new();
        items[1].to_resp2(&mut out);
        assert!(out.starts_with(b"*24\r\n$4\r\nname\r\n$40\r\n"));
        let mut out = Vec::new();
        items[0].to_resp2(&mut out);
        assert!(out.starts_with(b"*20\r\n"));
        assert_eq!(render(&JobLog::new()), Reply::Array(vec![]));
    }
}
