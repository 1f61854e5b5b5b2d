//! Permission checks as Redis 7.0's ACLCheckAllUserCommandPerm: each selector in turn (root
//! first); the first that allows the call wins; otherwise the most relevant refusal (a key or
//! channel before the command, the later argument on a tie).

use super::{Catalog, Selector, User, PERM_READ, PERM_WRITE};

/// A key a call touches, from the command's key specs.
#[derive(Debug, Clone, Copy)]
pub struct KeyRef<'a> {
    /// Argument index (for the ACL LOG and error texts).
    pub pos: usize,
    pub key: &'a [u8],
    /// The access the spec declares: [`PERM_READ`] for `access`, [`PERM_WRITE`] for
    /// `insert`/`delete`/`update` (both, or neither for e.g. EXISTS).
    pub perms: u8,
}

/// A channel a call publishes to or subscribes to.
#[derive(Debug, Clone, Copy)]
pub struct ChannelRef<'a> {
    pub pos: usize,
    pub channel: &'a [u8],
    /// PSUBSCRIBE's patterns match ACL patterns literally.
    pub is_pattern: bool,
}

/// What refused a call (Redis's ACL_DENIED_*, in its order of relevance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeniedKind {
    Command,
    Key,
    Channel,
}

/// A refusal and the argument it is about (0 for the command itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denied {
    pub kind: DeniedKind,
    pub pos: usize,
}

impl Selector {
    /// Whether this selector may run command `id`; `first_arg` is the argument after the
    /// command name (after the subcommand for a subcommand).
    pub fn allows_command(&self, cat: &Catalog, id: usize, first_arg: Option<&[u8]>) -> bool {
        if self.allcommands || self.bit(id) {
            return true;
        }
        if cat.entry(id).is_some_and(|e| e.no_auth) {
            return true;
        }
        match (first_arg, self.firstargs_of(id)) {
            (Some(a), Some(list)) => list.iter().any(|x| x.eq_ignore_ascii_case(a)),
            _ => false,
        }
    }

    /// Redis's ACLSelectorCheckKey.
    pub fn allows_key(&self, key: &[u8], perms: u8) -> bool {
        if self.allkeys {
            return true;
        }
        let want = perms & (PERM_READ | PERM_WRITE);
        self.patterns
            .iter()
            .any(|p| p.perms & want == want && crate::glob::glob_match(&p.pattern, key, false))
    }

    /// Redis's ACLCheckChannelAgainstList (plus allchannels).
    pub fn allows_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        if self.allchannels {
            return true;
        }
        self.channels.iter().any(|p| {
            if is_pattern {
                p.as_slice() == channel
            } else {
                crate::glob::glob_match(p, channel, false)
            }
        })
    }

    /// Redis's ACLSelectorCheckCmd.
    pub fn check(
        &self,
        cat: &Catalog,
        id: usize,
        first_arg: Option<&[u8]>,
        keys: &[KeyRef<'_>],
        channels: &[ChannelRef<'_>],
    ) -> Result<(), Denied> {
        if !self.allows_command(cat, id, first_arg) {
            return Err(Denied {
                kind: DeniedKind::Command,
                pos: 0,
            });
        }
        if let Some(k) = keys.iter().find(|k| !self.allows_key(k.key, k.perms)) {
            return Err(Denied {
                kind: DeniedKind::Key,
                pos: k.pos,
            });
        }
        if let Some(c) = channels
            .iter()
            .find(|c| !self.allows_channel(c.channel, c.is_pattern))
        {
            return Err(Denied {
                kind: DeniedKind::Channel,
                pos: c.pos,
            });
        }
        Ok(())
    }

    /// Redis's ACLSelectorHasUnrestrictedKeyAccess for reads: `allkeys`, or a `*` pattern
    /// that grants reading.
    pub fn reads_all_keys(&self) -> bool {
        self.allkeys
            || self
                .patterns
                .iter()
                .any(|p| p.perms & PERM_READ != 0 && p.pattern == b"*")
    }

    /// True when the selector allows every command, key and channel: the one cheap test a
    /// call needs for such a user.
    pub fn allows_everything(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }
}

impl User {
    /// Checks a call; `Ok` names the selector that allowed it (0 = root, n = the n-th
    /// `(...)` selector).
    pub fn check(
        &self,
        cat: &Catalog,
        id: usize,
        first_arg: Option<&[u8]>,
        keys: &[KeyRef<'_>],
        channels: &[ChannelRef<'_>],
    ) -> Result<usize, Denied> {
        let mut worst = Denied {
            kind: DeniedKind::Command,
            pos: 0,
        };
        for (i, s) in self.all_selectors().enumerate() {
            match s.check(cat, id, first_arg, keys, channels) {
                Ok(()) => return Ok(i),
                Err(d) => {
                    if d.kind > worst.kind || (d.kind == worst.kind && d.pos > worst.pos) {
                        worst = d;
                    }
                }
            }
        }
        Err(worst)
    }

    /// Whether some selector lets the user subscribe to / publish on `channel`.
    pub fn allows_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_selectors()
            .any(|s| s.allows_channel(channel, is_pattern))
    }

    /// True for a user every call is allowed to (the default user as it starts).
    pub fn allows_everything(&self) -> bool {
        self.root.allows_everything()
    }
}

impl User {
    /// Redis's ACLKillPubsubClientsIfNeeded test: None when subscribers of `original` keep
    /// all their channels under `self` (a selector with allchannels, or every original
    /// channel pattern still listed), else the channel patterns `self` allows.
    pub fn revoked_channels(&self, original: &User) -> Option<Vec<Vec<u8>>> {
        if self.all_selectors().any(|s| s.allchannels) {
            return None;
        }
        let upcoming: Vec<Vec<u8>> = self
            .all_selectors()
            .flat_map(|s| s.channels.iter().cloned())
            .collect();
        let superset = original
            .all_selectors()
            .all(|s| !s.allchannels && s.channels.iter().all(|c| upcoming.contains(c)));
        if superset {
            None
        } else {
            Some(upcoming)
        }
    }
}

/// Whether a subscription passes a list of channel patterns (literal for a pattern
/// subscription, glob for a channel), as Redis's ACLCheckChannelAgainstList.
pub fn channel_in_list(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p.as_slice() == channel
        } else {
            crate::glob::glob_match(p, channel, false)
        }
    })
}
