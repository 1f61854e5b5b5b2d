//! Authentication state each server owns: the default user's credentials and the ACL LOG.
//! The commands that read and change them are `crate::cmd::acl` and AUTH/HELLO.

use std::collections::VecDeque;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// The default user's credentials once ACL SETUSER changed them.
#[derive(Clone)]
pub struct DefaultUser {
    pub passwords: Vec<String>,
    pub nopass: bool,
}

/// The default user's credentials: None (the default) follows `requirepass`.
#[derive(Default)]
pub struct DefaultUserAuth(Mutex<Option<DefaultUser>>);

impl DefaultUserAuth {
    /// The credentials in force, given the current `requirepass`.
    pub fn current(&self, requirepass: &str) -> DefaultUser {
        self.0.lock().clone().unwrap_or_else(|| DefaultUser {
            nopass: requirepass.is_empty(),
            passwords: if requirepass.is_empty() {
                Vec::new()
            } else {
                vec![requirepass.to_string()]
            },
        })
    }

    /// Whether connections must AUTH (the default user has no `nopass`).
    pub fn requires_auth(&self, requirepass: &str) -> bool {
        !self.current(requirepass).nopass
    }

    /// Whether `pass` logs in as the default user. Compared as Redis 7.0 does, in time that
    /// does not depend on where the two differ: SHA-256 digests of both, compared in full (a
    /// byte-wise `==` stops at the first difference, a timing oracle for the password).
    pub fn password_ok(&self, requirepass: &str, pass: &[u8]) -> bool {
        let u = self.current(requirepass);
        if u.nopass {
            return true;
        }
        let given = Sha256::digest(pass);
        // Every password is compared (no early exit on a match either).
        u.passwords.iter().fold(false, |ok, p| {
            digests_equal(&Sha256::digest(p.as_bytes()), &given) | ok
        })
    }

    /// ACL SETUSER default changed the credentials.
    pub fn set(&self, u: DefaultUser) {
        *self.0.lock() = Some(u);
    }

    /// CONFIG SET requirepass: the default user has that one password again.
    pub fn requirepass_set(&self) {
        *self.0.lock() = None;
    }
}

/// Constant-time equality of two digests: all bytes are always looked at.
fn digests_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// One ACL LOG entry (Redis 7.0's fields).
pub struct Entry {
    pub count: u64,
    pub reason: &'static str,
    pub context: &'static str,
    pub object: String,
    pub username: String,
    /// Unix ms of the latest occurrence.
    pub at_ms: u64,
    pub client_info: String,
}

/// One server's ACL LOG (`Server::acl_log`), newest entry first: each server in a process
/// keeps its own.
#[derive(Default)]
pub struct AclLog(pub Mutex<VecDeque<Entry>>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_compare_in_full_and_nopass_admits_anyone() {
        let a = DefaultUserAuth::default();
        assert!(a.password_ok("s3cret", b"s3cret"));
        for wrong in [&b"s3creX"[..], b"S3cret", b"s3c", b"s3cret-and-more", b""] {
            assert!(!a.password_ok("s3cret", wrong), "{wrong:?}");
        }
        assert!(a.password_ok("", b"anything"), "nopass");
        assert!(digests_equal(b"abc", b"abc"));
        assert!(!digests_equal(b"abc", b"abd"));
        assert!(!digests_equal(b"abc", b"ab"));
    }
}
