//! The canonical text of a user, as Redis 7.0's ACLDescribeUser prints it in ACL LIST and
//! (per part) in ACL GETUSER: flags, password hashes, then each selector's keys, channels
//! and command rules. Command rules are rebuilt from the bitmap as Redis does: `+@all` or
//! `-@all`, then the best-fitting categories, then single commands and first arguments.

use super::{Bits, Catalog, Sanitize, Selector, User, CATEGORIES, PERM_ALL, PERM_READ, PERM_WRITE};

impl Selector {
    /// GETUSER's `keys` field: the patterns joined by spaces (`~*` for allkeys).
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, p) in self.patterns.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            push_pattern(&mut out, p.perms, &p.pattern);
        }
        out
    }

    /// GETUSER's `channels` field.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The selector as ACL LIST prints it: keys, channels, command rules.
    pub fn describe(&self, cat: &Catalog) -> Vec<u8> {
        let mut out = Vec::new();
        if self.allkeys {
            out.extend_from_slice(b"~* ");
        } else {
            for p in &self.patterns {
                push_pattern(&mut out, p.perms, &p.pattern);
                out.push(b' ');
            }
        }
        if self.allchannels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands(cat).as_bytes());
        out
    }

    /// Redis's ACLDescribeSelectorCommandRules.
    pub fn describe_commands(&self, cat: &Catalog) -> String {
        let mut rules = String::new();
        let mut fake = Selector {
            allkeys: false,
            allchannels: false,
            allcommands: false,
            cmds: Bits::new(cat.len()),
            firstargs: Vec::new(),
            patterns: Vec::new(),
            channels: Vec::new(),
        };
        let additive = !self.can_run_future_commands(cat);
        if additive {
            rules.push_str("-@all ");
        } else {
            rules.push_str("+@all ");
            let _ = fake.apply(cat, b"+@all");
        }
        // Best fit among the categories not applied yet, against a scratch copy from which
        // each applied category is taken back out.
        let mut temp = fake.clone();
        temp.cmds = self.cmds.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best: Option<usize> = None;
            let (mut mindiff, mut maxsame) = (u64::MAX, 0u64);
            for (j, done) in applied.iter().enumerate() {
                if *done {
                    continue;
                }
                let (on, off) = count_category(cat, &temp, 1u32 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let bit = 1u32 << j;
            fake.set_category(cat, bit, additive);
            temp.set_category(cat, bit, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(CATEGORIES[j]);
            rules.push(' ');
            applied[j] = true;
        }
        for &id in cat.top() {
            self.describe_single(cat, &mut fake, &mut rules, id);
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, cat: &Catalog, fake: &mut Selector, rules: &mut String, id: usize) {
        let Some(e) = cat.entry(id) else { return };
        let userbit = self.bit(id);
        if userbit != fake.bit(id) {
            rules.push(if userbit { '+' } else { '-' });
            rules.push_str(&e.name);
            rules.push(' ');
            fake.change_perm(cat, id, userbit);
        }
        for &s in &e.subs {
            self.describe_single(cat, fake, rules, s);
        }
        if !userbit {
            for a in self.firstargs_of(id).unwrap_or_default() {
                rules.push('+');
                rules.push_str(&e.name);
                rules.push('|');
                rules.push_str(&String::from_utf8_lossy(a));
                rules.push(' ');
            }
        }
    }
}

/// Commands (containers and subcommands) of a category that are on and off in a selector.
fn count_category(cat: &Catalog, s: &Selector, bit: u32) -> (u64, u64) {
    let (mut on, mut off) = (0u64, 0u64);
    for id in 0..cat.len() {
        if cat.entry(id).is_some_and(|e| e.cats & bit != 0) {
            if s.bit(id) {
                on += 1;
            } else {
                off += 1;
            }
        }
    }
    (on, off)
}

fn push_pattern(out: &mut Vec<u8>, perms: u8, pat: &[u8]) {
    out.extend_from_slice(match perms {
        PERM_ALL => b"~".as_slice(),
        PERM_READ => b"%R~",
        PERM_WRITE => b"%W~",
        _ => b"~",
    });
    out.extend_from_slice(pat);
}

impl User {
    /// Flags in Redis's order (ACL GETUSER's `flags`).
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(Sanitize::Skip) => f.push("skip-sanitize-payload"),
            Some(Sanitize::Sanitize) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// The rules ACL LIST prints after `user <name> `.
    pub fn describe(&self, cat: &Catalog) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.flags() {
            out.extend_from_slice(f.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&self.root.describe(cat));
        for s in &self.selectors {
            out.extend_from_slice(b" (");
            out.extend_from_slice(&s.describe(cat));
            out.push(b')');
        }
        out
    }
}
