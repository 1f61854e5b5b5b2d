//! Bounded polling and INFO parsing.

use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it holds; panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// [`wait_until`] with the older harness's argument order (timeout first), kept so the
/// moved tests read as before.
pub fn wait_for(timeout: Duration, what: &str, f: impl FnMut() -> bool) {
    wait_until(what, timeout, f)
}

/// The value of `name:value` in INFO-style text (INFO, CLUSTER INFO), trimmed.
pub fn info_field(info_text: &str, name: &str) -> Option<String> {
    info_text.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_field_finds_exact_names_only() {
        let text = "# Replication\r\nrole:master\r\nmaster_repl_offset:42\r\nrole_x:no\r\n";
        assert_eq!(info_field(text, "role").as_deref(), Some("master"));
        assert_eq!(
            info_field(text, "master_repl_offset").as_deref(),
            Some("42")
        );
        assert_eq!(info_field(text, "master_repl"), None);
        assert_eq!(info_field(text, "missing"), None);
    }

    #[test]
    fn wait_until_returns_once_true() {
        let mut n = 0;
        wait_until("three polls", Duration::from_secs(10), || {
            n += 1;
            n >= 3
        });
        assert_eq!(n, 3);
    }

    #[test]
    #[should_panic(expected = "timed out after")]
    fn wait_until_panics_naming_what() {
        wait_until("never", Duration::from_millis(100), || false);
    }
}
