//! A plain tessera-node for the integration and security suites: saving off, its temp dir
//! as working directory; derefs to the [`Server`] guard.

use std::time::Duration;

use crate::server::{Launch, Server};

/// A running tessera-node; killed (and reaped) on drop.
pub struct Node {
    pub srv: Server,
}

crate::deref_server!(Node);

impl Node {
    pub fn start() -> Node {
        Node::start_with(&[])
    }

    /// Starts with extra `--directive value` arguments, in a fresh temp dir as cwd.
    pub fn start_with(extra: &[&str]) -> Node {
        Node {
            srv: Launch::tessera()
                .args(&["--save", ""])
                .args(extra)
                .cwd()
                .start(),
        }
    }

    /// Waits (bounded) for the process to exit by itself.
    pub fn wait_exit(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        self.srv.wait_exit(Duration::from_secs(secs))
    }
}
