//! oom-score-adj: the process's /proc/self/oom_score_adj follows the config and the role
//! (master or replica value of oom-score-adj-values), as Redis 7.0's setOOMScoreAdj. The
//! third value is the save child's (persist::child), set on it once it is started.

/// Where Linux keeps the process's OOM-killer adjustment.
const PROC_FILE: &str = "/proc/self/oom_score_adj";

/// The score the process had before the node first changed it (restored when
/// oom-score-adj goes back to `no`); `None` while the node has not changed it.
#[derive(Default)]
pub struct OomScore {
    base: parking_lot::Mutex<Option<i64>>,
}

/// Why the score could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum OomError {
    #[error("Unable to read oom_score_adj: {0}")]
    Read(std::io::Error),
    #[error("Unable to write oom_score_adj: {0}")]
    Write(std::io::Error),
}

impl OomScore {
    /// Applies `mode` (no / yes / relative / absolute) with `values` (master, replica,
    /// child) for the current role.
    pub fn apply(&self, mode: &str, values: &str, replica: bool) -> Result<(), OomError> {
        let mut base = self.base.lock();
        let val = if mode == "no" {
            match base.take() {
                Some(b) => b,
                None => return Ok(()),
            }
        } else {
            let b = match *base {
                Some(b) => b,
                None => {
                    let text = std::fs::read_to_string(PROC_FILE).map_err(OomError::Read)?;
                    let b = text.trim().parse().unwrap_or(0);
                    *base = Some(b);
                    b
                }
            };
            let v: i64 = values
                .split_whitespace()
                .nth(usize::from(replica))
                .and_then(|w| w.parse().ok())
                .unwrap_or(0);
            let v = if mode == "absolute" {
                v
            } else {
                v.saturating_add(b)
            };
            v.clamp(-1000, 1000)
        };
        std::fs::write(PROC_FILE, format!("{val}\n")).map_err(|e| {
            tracing::warn!("Unable to write oom_score_adj: {e}");
            OomError::Write(e)
        })
    }

    /// The background child's score (third value of oom-score-adj-values, relative to the
    /// score the server started with unless `absolute`); None when oom-score-adj is `no`.
    fn child_value(&self, mode: &str, values: &str) -> Option<i64> {
        if mode == "no" {
            return None;
        }
        let v: i64 = values
            .split_whitespace()
            .nth(2)
            .and_then(|w| w.parse().ok())
            .unwrap_or(0);
        let v = if mode == "absolute" {
            v
        } else {
            let base = match *self.base.lock() {
                Some(b) => b,
                None => std::fs::read_to_string(PROC_FILE)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or(0),
            };
            v.saturating_add(base)
        };
        Some(v.clamp(-1000, 1000))
    }

    /// Gives a save child `pid` its class's score, as Redis's child sets its own
    /// (CONFIG_OOM_BGCHILD). A failure is logged: the save goes on.
    pub fn apply_child(&self, srv: &super::Server, pid: i32) {
        let (mode, values) = {
            let c = &srv.config.read().typed;
            (c.oom_score_adj.clone(), c.oom_score_adj_values.clone())
        };
        let Some(v) = self.child_value(&mode, &values) else {
            return;
        };
        if let Err(e) = std::fs::write(format!("/proc/{pid}/oom_score_adj"), format!("{v}\n")) {
            tracing::warn!("Unable to write the child's oom_score_adj: {e}");
        }
    }

    /// [`OomScore::apply`] with the server's config and role.
    pub fn apply_for(&self, srv: &super::Server) -> Result<(), OomError> {
        let (mode, values) = {
            let c = &srv.config.read().typed;
            (c.oom_score_adj.clone(), c.oom_score_adj_values.clone())
        };
        self.apply(&mode, &values, srv.repl.is_replica())
    }
}
