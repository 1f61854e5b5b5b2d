//! ACL files (`aclfile`): Redis 7.0's format, one `user <name> <rules...>` line per user as
//! ACL LIST prints them. Loading is all or nothing: [`parse`] builds a whole new set of users
//! or returns every problem found, in Redis's words and with line numbers, so ACL LOAD can
//! keep the old users. [`save`] writes a temp file and renames it over the old one, so a
//! crash leaves either file whole. The only I/O of the ACL module is here.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use super::{has_spaces, merge_selector_args, Catalog, Env, RuleError, User};

/// The users an ACL file declares: `default` (Redis's all-access default when the file has
/// no `default` line) and the others by name.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub default: User,
    pub users: BTreeMap<Vec<u8>, User>,
}

/// Redis's ACLLoadFromFile over the file's bytes. `shown` is the file name the errors
/// name (the configured `aclfile`). `Err` is Redis's one-line list of every error, ending
/// with its "no change ... was performed" warning.
pub fn parse(text: &[u8], shown: &str, env: Env<'_>) -> Result<Loaded, String> {
    // Redis reads the file as a C string: a NUL ends it.
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    let mut errors = String::new();
    let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let line = trim(raw, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        // Split on single spaces, as sdssplitlen: two spaces make an empty argument.
        let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if argv[0] != b"user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{shown}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = argv[1];
        if has_spaces(name) {
            errors.push_str(&format!(
                "'{shown}:{n}: username '{}' contains invalid characters. ",
                lossy(name)
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {n}. ",
                lossy(name)
            ));
            continue;
        }
        let mut u = User::new(env);
        let Ok(ops) = merge_selector_args(&argv[2..]) else {
            errors.push_str(&format!(
                "{shown}:{n}: Unmatched parenthesis in selector definition."
            ));
            users.insert(name.to_vec(), u);
            continue;
        };
        let mut syntax_error = false;
        for op in &ops {
            let op = trim(op, b"\t\r\n");
            match u.apply(env, op) {
                Ok(()) => {}
                // Unknown names are all listed (they tell nothing secret)...
                Err(e @ RuleError::UnknownName) => errors.push_str(&format!(
                    "{shown}:{n}: Error in applying operation '{}': {e}. ",
                    lossy(op)
                )),
                // ...other errors only the first of the line (it may cause the next ones).
                Err(e) if !syntax_error => {
                    errors.push_str(&format!("{shown}:{n}: {e}. "));
                    syntax_error = true;
                }
                Err(_) => {}
            }
        }
        users.insert(name.to_vec(), u);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        return Err(errors);
    }
    let default = users
        .remove(b"default".as_slice())
        .unwrap_or_else(|| User::default_user(env));
    Ok(Loaded { default, users })
}

/// The file's bytes: every user (`default` included) in name order, as ACL LIST prints
/// them, one per line.
pub fn render<'a>(users: impl IntoIterator<Item = (&'a [u8], &'a User)>, cat: &Catalog) -> Vec<u8> {
    let mut all: Vec<(&[u8], &User)> = users.into_iter().collect();
    all.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::new();
    for (name, u) in all {
        out.extend_from_slice(b"user ");
        out.extend_from_slice(name);
        out.push(b' ');
        out.extend_from_slice(&u.describe(cat));
        out.push(b'\n');
    }
    out
}

/// Reads the ACL file; the error is Redis's "Error loading ACLs, opening file ..." text.
pub fn read(path: &Path, shown: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{shown}': {}",
            os_words(&e)
        )
    })
}

/// Writes `bytes` as the ACL file: a temp file next to it (`<file>.tmp-<pid>-<ms>`, as
/// Redis names it), then a rename over the old file. The temp file is removed on failure.
pub fn save(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}-{ms}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let r = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// strerror's words for an I/O error, without Rust's " (os error N)".
pub fn os_words(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// `s` without the bytes of `set` at either end (sdstrim).
fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|b| !set.contains(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !set.contains(b))
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(c: &Catalog) -> Env<'_> {
        Env {
            catalog: c,
            pubsub_allchannels: false,
        }
    }

    #[test]
    fn errors_name_file_and_line_and_keep_going() {
        let c = Catalog::default();
        let text = b"user alice on >a ~*\n\n  # comment\nuser bob on <nopw bogus\nuser alice on\nuser a\tb on\nuser x on (+get\n";
        let e = parse(text, "u.acl", env(&c)).unwrap_err();
        assert_eq!(
            e,
            "u.acl:3 should start with user keyword followed by the username. \
             u.acl:4: The password you are trying to remove from the user does not exist. \
             WARNING: Duplicate user 'alice' found on line 5. \
             'u.acl:6: username 'a\tb' contains invalid characters. \
             u.acl:7: Unmatched parenthesis in selector definition.\
             WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        );
    }

    #[test]
    fn default_is_all_access_unless_declared() {
        let c = Catalog::default();
        let l = parse(b"user alice on nopass\r\n", "f", env(&c)).unwrap();
        assert_eq!(l.default, User::default_user(env(&c)));
        assert!(l.users[b"alice".as_slice()].enabled);
        let l = parse(b"user default off\n", "f", env(&c)).unwrap();
        assert!(!l.default.enabled && !l.default.nopass);
    }

    #[test]
    fn render_is_sorted_and_reads_back() {
        let c = Catalog::default();
        let l = parse(
            b"user zed on >z ~z*\nuser default on nopass ~* &*\n",
            "f",
            env(&c),
        )
        .unwrap();
        let mut all: Vec<(&[u8], &User)> = vec![(b"default".as_slice(), &l.default)];
        all.extend(l.users.iter().map(|(n, u)| (n.as_slice(), u)));
        let text = render(all, &c);
        assert!(text.starts_with(b"user default on nopass"));
        let again = parse(&text, "f", env(&c)).unwrap();
        assert_eq!(again.default, l.default);
        assert_eq!(again.users, l.users);
    }

    #[test]
    fn trim_strips_both_ends_only() {
        assert_eq!(trim(b" \ta b\r\n", b" \t\r\n"), b"a b");
        assert_eq!(trim(b"  ", b" "), b"");
    }
}
