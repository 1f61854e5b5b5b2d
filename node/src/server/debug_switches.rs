//! Switches DEBUG turns (Redis's `server.active_expire_enabled`, `skip_checksum_validation`,
//! ...): server state, one per server, read by the code they steer.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};

/// Redis's default quicklist packed threshold (1 GiB): larger elements are "plain" nodes.
pub const PACKED_THRESHOLD_DEFAULT: u64 = 1 << 30;

pub struct DebugSwitches {
    /// DEBUG SET-ACTIVE-EXPIRE: false stops the active expiry cycle (keys past their TTL
    /// then go only when touched).
    pub active_expire: AtomicBool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE does not compare the payload's CRC64
    /// (RDB files are still checked).
    pub skip_checksum_validation: AtomicBool,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS (recorded).
    pub disable_deny_scripts: AtomicBool,
    /// DEBUG PAUSE-CRON (recorded).
    pub pause_cron: AtomicBool,
    /// DEBUG QUICKLIST-PACKED-THRESHOLD, bytes (recorded: lists here have no plain nodes).
    pub quicklist_packed_threshold: AtomicU64,
    /// DEBUG AOF-FLUSH-SLEEP, microseconds (recorded).
    pub aof_flush_sleep_us: AtomicU64,
    /// DEBUG REPLYBUFFER PEAK-RESET-TIME in ms (-1: never) and RESIZING (recorded).
    pub reply_buffer_peak_reset_ms: AtomicI64,
    pub reply_buffer_resizing: AtomicBool,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: the bus drops incoming messages of this type
    /// (-1: none).
    pub cluster_drop_packet_filter: AtomicI64,
    /// Until when (ms) a DEBUG SLEEP holds the node, 0 for none: the replica link applies
    /// nothing meanwhile, as in Redis, whose single event loop the sleep blocks whole (the
    /// link runs on the main runtime here, which the sleeping I/O thread does not block).
    pub sleeping_until_ms: AtomicU64,
}

impl Default for DebugSwitches {
    fn default() -> Self {
        DebugSwitches {
            active_expire: AtomicBool::new(true),
            skip_checksum_validation: AtomicBool::new(false),
            disable_deny_scripts: AtomicBool::new(false),
            pause_cron: AtomicBool::new(false),
            quicklist_packed_threshold: AtomicU64::new(PACKED_THRESHOLD_DEFAULT),
            aof_flush_sleep_us: AtomicU64::new(0),
            reply_buffer_peak_reset_ms: AtomicI64::new(5000),
            reply_buffer_resizing: AtomicBool::new(true),
            cluster_drop_packet_filter: AtomicI64::new(-1),
            sleeping_until_ms: AtomicU64::new(0),
        }
    }
}
