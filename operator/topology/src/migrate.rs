//! Slot migration, the way Redis does it: IMPORTING on the target, MIGRATING on the source,
//! GETKEYSINSLOT + MIGRATE ... KEYS in large batches, then SETSLOT NODE on the target, the
//! source and every other master. Every command here is safe to repeat after a crash.

use redis::Value;
use tracing::debug;

use super::conn::{cluster, NodeConn};
use super::plan::NodeRef;
use super::{EngineOptions, TopologyError};

/// Move every key of `slot` from `src` to `dst`. With `open`, the slot is first marked
/// IMPORTING/MIGRATING (only valid when `src` owns the slot); otherwise the keys are copied
/// over plainly (rolling back keys left on a node that does not own the slot).
pub(super) async fn move_keys(
    slot: u16,
    src: &NodeRef,
    src_conn: &mut NodeConn,
    dst: &NodeRef,
    dst_conn: &mut NodeConn,
    open: bool,
    opts: &EngineOptions,
) -> Result<u64, TopologyError> {
    if open {
        dst_conn
            .run::<()>(cluster("SETSLOT").arg(slot).arg("IMPORTING").arg(&src.id))
            .await?;
        src_conn
            .run::<()>(cluster("SETSLOT").arg(slot).arg("MIGRATING").arg(&dst.id))
            .await?;
    }
    let mut moved = 0u64;
    let timeout_ms = opts.migrate_timeout.as_millis().min(u128::from(u32::MAX)) as u64;
    loop {
        let keys: Vec<Vec<u8>> = src_conn
            .run(
                cluster("GETKEYSINSLOT")
                    .arg(slot)
                    .arg(opts.migrate_batch.max(1)),
            )
            .await?;
        if keys.is_empty() {
            break;
        }
        let mut m = redis::cmd("MIGRATE");
        // REPLACE: while a slot migrates, a key present on the source is the one clients see,
        // so the source copy is authoritative over a leftover copy on the target.
        m.arg(&dst.host)
            .arg(dst.port)
            .arg("")
            .arg(0)
            .arg(timeout_ms)
            .arg("REPLACE");
        // The operator's user when it has one (every node holds it once the users step ran,
        // and `default` may be off), else the default user's password.
        if let Some(a) = &opts.admin {
            m.arg("AUTH2").arg(&a.user).arg(&a.password);
        } else if let Some(pw) = &opts.password {
            m.arg("AUTH").arg(pw);
        }
        m.arg("KEYS").arg(&keys);
        let _: Value = src_conn.run(&m).await?;
        moved += keys.len() as u64;
    }
    debug!(slot, moved, from = %src.pod, to = %dst.pod, "keys moved");
    Ok(moved)
}

/// Tell `node` that `owner` owns `slot`.
pub(super) async fn set_node(
    slot: u16,
    owner: &NodeRef,
    conn: &mut NodeConn,
) -> Result<(), TopologyError> {
    conn.run::<()>(cluster("SETSLOT").arg(slot).arg("NODE").arg(&owner.id))
        .await
}
