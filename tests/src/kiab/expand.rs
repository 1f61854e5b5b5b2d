//! String rewriting the process kubelet applies to a container's command, args and env:
//! Kubernetes `$(VAR)` expansion, and mount-path → host-directory rewriting.
//!
//! Mount-path rewriting is the one thing a real kubelet never does: a real container sees its
//! volumes at their `mountPath` through a mount namespace. Our pods are plain processes on the
//! host, so a path such as `/etc/tessera/node.conf` in an argument is rewritten to the host
//! directory backing the volume. File *contents* are never rewritten, which is why the contract
//! says node.conf must hold no absolute paths.

use std::collections::HashMap;

/// Expands `$(NAME)` references like Kubernetes does for command, args and env values:
/// a defined name is replaced, an undefined one is left verbatim, `$$` is an escaped `$`,
/// and any other `$` is literal.
pub fn expand_vars(input: &str, vars: &HashMap<String, String>) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            // Copy one UTF-8 char.
            let ch_len = utf8_len(bytes[i]);
            out.push_str(&input[i..i + ch_len]);
            i += ch_len;
            continue;
        }
        match bytes.get(i + 1) {
            Some(b'$') => {
                out.push('$');
                i += 2;
            }
            Some(b'(') => match input[i + 2..].find(')') {
                Some(rel_end) => {
                    let name = &input[i + 2..i + 2 + rel_end];
                    let whole = &input[i..i + 2 + rel_end + 1];
                    match vars.get(name) {
                        Some(v) => out.push_str(v),
                        None => out.push_str(whole),
                    }
                    i += whole.len();
                }
                None => {
                    out.push_str(&input[i..]);
                    i = bytes.len();
                }
            },
            _ => {
                out.push('$');
                i += 1;
            }
        }
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// Maps container mount paths to the host directories (or files) that back them.
#[derive(Debug, Clone, Default)]
pub struct MountRewriter {
    /// (mount path without trailing slash, host path), longest mount path first so nested
    /// mounts win over their parents.
    mounts: Vec<(String, String)>,
}

impl MountRewriter {
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut mounts: Vec<(String, String)> = pairs
            .into_iter()
            .map(|(m, h)| {
                let m = if m.len() > 1 {
                    m.trim_end_matches('/').to_string()
                } else {
                    m
                };
                (m, h)
            })
            .filter(|(m, _)| m.starts_with('/') && m.len() > 1)
            .collect();
        mounts.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        Self { mounts }
    }

    /// Rewrites every occurrence of a mount path that stands as a whole path component
    /// (`/data`, `/data/x`, `--dir=/data`, but not `/database` or `/x/data`).
    pub fn rewrite(&self, input: &str) -> String {
        if self.mounts.is_empty() {
            return input.to_string();
        }
        let mut out = String::with_capacity(input.len());
        let mut i = 0;
        'outer: while i < input.len() {
            let prev_ok = i == 0 || !is_path_char(input.as_bytes()[i - 1]);
            if prev_ok && input.as_bytes()[i] == b'/' {
                for (mount, host) in &self.mounts {
                    if input[i..].starts_with(mount.as_str()) {
                        let after = input.as_bytes().get(i + mount.len()).copied();
                        let next_ok = match after {
                            None => true,
                            Some(b'/') => true,
                            Some(c) => !is_path_char(c),
                        };
                        if next_ok {
                            out.push_str(host);
                            i += mount.len();
                            continue 'outer;
                        }
                    }
                }
            }
            let ch_len = utf8_len(input.as_bytes()[i]);
            out.push_str(&input[i..i + ch_len]);
            i += ch_len;
        }
        out
    }
}

fn is_path_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b'/' | b'~')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> HashMap<String, String> {
        [("POD_IP", "127.0.1.7"), ("NAME", "rc-0-1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expands_like_kubernetes() {
        let v = vars();
        assert_eq!(expand_vars("$(POD_IP)", &v), "127.0.1.7");
        assert_eq!(
            expand_vars("--ip=$(POD_IP):6379", &v),
            "--ip=127.0.1.7:6379"
        );
        assert_eq!(expand_vars("$(MISSING)", &v), "$(MISSING)");
        assert_eq!(expand_vars("$$(POD_IP)", &v), "$(POD_IP)");
        assert_eq!(expand_vars("a$b", &v), "a$b");
        assert_eq!(expand_vars("tail$", &v), "tail$");
        assert_eq!(expand_vars("$(POD_IP", &v), "$(POD_IP");
        assert_eq!(expand_vars("é$(NAME)ü", &v), "érc-0-1ü");
        assert_eq!(expand_vars("$(NAME)$(POD_IP)", &v), "rc-0-1127.0.1.7");
    }

    #[test]
    fn rewrites_whole_mount_paths_only() {
        let r = MountRewriter::new([
            ("/data".to_string(), "/s/pvc/data".to_string()),
            ("/etc/tessera/".to_string(), "/s/cm".to_string()),
            ("/etc/tessera/tls".to_string(), "/s/tls".to_string()),
        ]);
        assert_eq!(r.rewrite("/data"), "/s/pvc/data");
        assert_eq!(r.rewrite("/data/nodes.conf"), "/s/pvc/data/nodes.conf");
        assert_eq!(r.rewrite("--dir=/data"), "--dir=/s/pvc/data");
        assert_eq!(r.rewrite("/database"), "/database");
        assert_eq!(r.rewrite("/x/data"), "/x/data");
        assert_eq!(r.rewrite("/etc/tessera/node.conf"), "/s/cm/node.conf");
        assert_eq!(r.rewrite("/etc/tessera/tls/ca.crt"), "/s/tls/ca.crt");
        assert_eq!(
            r.rewrite("cat /etc/tessera/node.conf > /data/x"),
            "cat /s/cm/node.conf > /s/pvc/data/x"
        );
        assert_eq!(r.rewrite("no paths here"), "no paths here");
    }
}
