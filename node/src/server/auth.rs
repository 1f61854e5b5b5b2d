//! Authentication state each server owns: the default user's credentials and the ACL LOG.
//! The commands that read and change them are `crate::cmd::acl` and AUTH/HELLO.

use std::collections::VecDeque;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

/// The default user's credentials once ACL SETUSER changed them.
#[derive(Clone)]
pub struct DefaultUser {
    /// SHA-256 hex of each password (as ACL GETUSER shows them).
    pub passwords: Vec<String>,
    pub nopass: bool,
}

/// The default user's credentials (None, the default, follows `requirepass`), and the other
/// ACL users of this server with the command catalog their rules are written against.
#[derive(Default)]
pub struct DefaultUserAuth(Mutex<Option<DefaultUser>>, pub AclUsers);

/// The users other than `default`, by name (ACL USERS and LIST list them in name order).
pub struct AclUsers {
    pub users: Watched<std::collections::BTreeMap<Vec<u8>, crate::acl::User>>,
    /// Built on first use by the command layer (`cmd::acl::build_catalog`).
    pub catalog: std::sync::OnceLock<crate::acl::Catalog>,
    /// The config file's `user` lines were applied (on first use, by `cmd::acl::users`).
    pub loaded: std::sync::OnceLock<()>,
    /// The default user's flags and permissions once ACL SETUSER changed them (None: on,
    /// every command, key and channel). Its passwords stay in [`DefaultUserAuth`].
    pub default_rules: Watched<Option<crate::acl::User>>,
    /// True while `default_rules` does not allow everything: default connections are then
    /// checked too.
    pub default_restricted: std::sync::atomic::AtomicBool,
    /// Bumped by every change to `users` or `default_rules` (see [`Watched`]).
    pub version: Arc<AtomicU64>,
}

impl Default for AclUsers {
    fn default() -> Self {
        let version = Arc::new(AtomicU64::new(0));
        AclUsers {
            users: Watched::new(Default::default(), version.clone()),
            catalog: Default::default(),
            loaded: Default::default(),
            default_rules: Watched::new(None, version.clone()),
            default_restricted: Default::default(),
            version,
        }
    }
}

/// The users' guard [`crate::cmd::acl::acl_users`] hands out.
pub type UsersGuard<'a> = WatchedGuard<'a, std::collections::BTreeMap<Vec<u8>, crate::acl::User>>;

/// A mutex whose guard bumps a shared version when it was used to change the value.
/// Connections keep a copy of their user's rules ([`AclView`]) and compare only this
/// version per command, so no change can bypass it: the value is reachable only through
/// [`Watched::lock`].
pub struct Watched<T> {
    m: Mutex<T>,
    version: Arc<AtomicU64>,
}

impl<T> Watched<T> {
    fn new(v: T, version: Arc<AtomicU64>) -> Self {
        Watched {
            m: Mutex::new(v),
            version,
        }
    }

    pub fn lock(&self) -> WatchedGuard<'_, T> {
        WatchedGuard {
            g: self.m.lock(),
            version: &self.version,
            dirty: false,
        }
    }
}

/// A [`Watched`] value's guard: a mutable borrow marks it changed.
pub struct WatchedGuard<'a, T> {
    g: MutexGuard<'a, T>,
    version: &'a AtomicU64,
    dirty: bool,
}

impl<T> std::ops::Deref for WatchedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.g
    }
}

impl<T> std::ops::DerefMut for WatchedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.dirty = true;
        &mut self.g
    }
}

impl<T> Drop for WatchedGuard<'_, T> {
    /// Bumped while the lock is still held: whoever sees the new version and then takes
    /// the lock reads the new value.
    fn drop(&mut self) {
        if self.dirty {
            self.version.fetch_add(1, Ordering::Release);
        }
    }
}

/// A connection's copy of its user's rules (`ClientState::acl`), valid while the users'
/// version and the connection's login are the ones it was taken at: the per-command ACL
/// check then takes no lock and looks nothing up.
#[derive(Clone, Default)]
pub struct AclView {
    /// ([`AclUsers::version`], `ClientHandle::acl_gen`) when taken; None: not taken yet.
    pub stamp: Option<(u64, u64)>,
    pub access: Access,
}

/// What a connection's user may do.
#[derive(Clone, Default)]
pub enum Access {
    /// Everything (the default user as it starts).
    #[default]
    All,
    /// What these rules allow.
    User(Arc<crate::acl::User>),
    /// Nothing: the user was deleted and the connection is being closed.
    Gone,
}

impl DefaultUserAuth {
    /// The credentials in force, given the current `requirepass`.
    pub fn current(&self, requirepass: &str) -> DefaultUser {
        self.0.lock().clone().unwrap_or_else(|| DefaultUser {
            nopass: requirepass.is_empty(),
            passwords: if requirepass.is_empty() {
                Vec::new()
            } else {
                vec![crate::acl::hash_password(requirepass.as_bytes())]
            },
        })
    }

    /// Whether the default user is `off` (ACL SETUSER default off).
    fn default_off(&self) -> bool {
        self.1
            .default_rules
            .lock()
            .as_ref()
            .is_some_and(|u| !u.enabled)
    }

    /// Whether connections must AUTH (the default user has no `nopass`, or is off).
    pub fn requires_auth(&self, requirepass: &str) -> bool {
        !self.current(requirepass).nopass || self.default_off()
    }

    /// Whether `pass` logs in as the default user (never while it is off). Compared as
    /// Redis 7.0 does, in time that does not depend on where the two differ: SHA-256
    /// digests, compared in full (a byte-wise `==` stops at the first difference).
    pub fn password_ok(&self, requirepass: &str, pass: &[u8]) -> bool {
        if self.default_off() {
            return false;
        }
        let u = self.current(requirepass);
        if u.nopass {
            return true;
        }
        let given = crate::acl::hash_password(pass);
        // Every password is compared (no early exit on a match either).
        u.passwords.iter().fold(false, |ok, p| {
            digests_equal(p.as_bytes(), given.as_bytes()) | ok
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
    fn only_a_change_bumps_the_users_version() {
        let a = AclUsers::default();
        let v = || a.version.load(Ordering::Acquire);
        let _ = a.users.lock().get(&b"x"[..]).is_some();
        let _ = a.default_rules.lock().is_some();
        assert_eq!(v(), 0, "reads leave it");
        a.users.lock().insert(
            b"x".to_vec(),
            crate::acl::User::new(crate::acl::Env {
                catalog: &crate::acl::Catalog::default(),
                pubsub_allchannels: false,
            }),
        );
        assert_eq!(v(), 1);
        *a.default_rules.lock() = None;
        assert_eq!(v(), 2, "one version for both");
    }

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
