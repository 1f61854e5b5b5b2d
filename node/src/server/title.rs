//! The process title (`set-proc-title`, `proc-title-template`) as Redis 7.0 sets it on
//! Linux: the memory the kernel shows as /proc/<pid>/cmdline (the argv strings and the
//! environment strings right after them) is overwritten with the expanded template, as
//! Redis's setproctitle.c does (`ps` and Redis's own test read it there). prctl(PR_SET_NAME)
//! would only change the 15-byte `comm`, not the command line.
//!
//! The environment strings are copied to the heap first ([`Area::take_over`], while the
//! process has one thread), so the area belongs to the title alone afterwards.

use parking_lot::Mutex;

use crate::config::Config;

/// Redis's SPT_MAXTITLE: longer titles are cut.
const MAX_TITLE: usize = 255;

/// The argv + environment strings area the title is written into.
pub struct Area {
    /// First byte of argv[0].
    base: usize,
    /// One past the last byte of the area (the environment's end).
    end: usize,
    /// The NUL that ended argv[0] (Redis's SPT.nul), marked '.' under a shorter title.
    nul: usize,
    /// Whether the whole area was cleared once (later titles clear their own length).
    reset: bool,
    /// argv[0] as the process was started (the template's `{title}`).
    arg0: String,
}

/// The area's bounds from /proc/self/stat: arg_start, arg_end, env_start, env_end
/// (fields 48 to 51; the command name in field 2 may hold spaces, so count after its ')').
fn bounds(stat: &str) -> Option<[usize; 4]> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let mut out = [0usize; 4];
    for (i, o) in out.iter_mut().enumerate() {
        *o = f.get(45 + i)?.parse().ok()?;
    }
    Some(out)
}

impl Area {
    /// Prepares the command line area for titles: moves the environment strings to the
    /// heap and returns the area, or None when the layout is not the usual one (argv then
    /// the environment, contiguous) or cannot be read.
    ///
    /// Must run before the process starts a second thread: it replaces the environment.
    pub fn take_over(arg0: std::ffi::OsString) -> Option<Area> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let [arg_start, arg_end, env_start, env_end] = bounds(&stat)?;
        let usual = arg_start < arg_end
            && arg_end <= env_start
            && env_start <= env_end
            && env_end - arg_start < (1 << 20);
        let arg0_len = arg0.as_encoded_bytes().len();
        if !usual || arg0_len >= arg_end - arg_start {
            tracing::debug!("unusual command line layout: no process title");
            return None;
        }
        // The argv strings end at arg_end; the environment joins the area only when it
        // starts right there (as the kernel lays it out).
        let end = if env_start == arg_end {
            let vars: Vec<_> = std::env::vars_os().collect();
            // SAFETY: clearenv only resets libc's `environ`; the caller guarantees no other
            // thread reads or writes the environment meanwhile. set_var below copies each
            // variable to the heap (glibc's setenv allocates the strings and the array).
            if unsafe { libc::clearenv() } != 0 {
                return None;
            }
            for (k, v) in vars {
                // set_var refuses (panics on) names it could not have listed; such an
                // entry is dropped.
                let bad = k.is_empty() || k.as_encoded_bytes().iter().any(|&b| b == b'=' || b == 0);
                if !bad {
                    std::env::set_var(k, v);
                }
            }
            env_end
        } else {
            arg_end
        };
        Some(Area {
            base: arg_start,
            end,
            nul: arg_start + arg0_len,
            reset: false,
            arg0: arg0.to_string_lossy().into_owned(),
        })
    }

    /// Writes `title` (cut to the area and to Redis's 255 bytes) as setproctitle.c does:
    /// the kernel shows the argv area whole while its last byte is NUL, and the title up
    /// to its NUL once a longer title ran over that byte into the environment's area.
    fn write(&mut self, title: &str) {
        let size = self.end - self.base;
        let room = MAX_TITLE.min(size - 1);
        let t = title.as_bytes();
        let len = t.len().min(room);
        let clear = if self.reset {
            (MAX_TITLE + 1).min(size)
        } else {
            size
        };
        self.reset = true;
        // SAFETY: [base, end) is this process's argv and environment strings, mapped and
        // writable for its whole life (the kernel's arg_start..env_end of /proc/self/stat).
        // Nothing holds a Rust reference into it: std keeps raw argv pointers it reads only
        // in env::args (called once, in main, before this), and the environment was moved
        // out by `take_over`. Every write stays inside the area (len < size, clear <= size,
        // base <= nul < end), under the ProcTitle lock.
        unsafe {
            let base = self.base as *mut u8;
            std::ptr::write_bytes(base, 0, clear);
            std::ptr::copy_nonoverlapping(t.as_ptr(), base, len);
            let nul = self.base + len;
            if nul < self.nul {
                *(self.nul as *mut u8) = b'.';
            } else if nul == self.nul && nul + 1 < self.end {
                *(self.nul as *mut u8) = b' ';
                *((nul + 1) as *mut u8) = 0;
            }
        }
    }
}

/// A server's hold on the process title (inactive unless the binary handed it the area).
#[derive(Default)]
pub struct ProcTitle {
    inner: Mutex<Option<(Area, String)>>,
}

impl ProcTitle {
    /// Hands over the area; `c`'s template counts as applied (see [`Self::config_changed`]).
    pub fn install(&self, area: Area, c: &Config) {
        *self.inner.lock() = Some((area, c.typed.proc_title_template.clone()));
    }

    /// Sets the title from `c`'s template (at start, when set-proc-title is yes).
    pub fn apply(&self, c: &Config) {
        if let Some((area, seen)) = self.inner.lock().as_mut() {
            let t = expand(&c.typed.proc_title_template, &area.arg0, c);
            area.write(&t);
            seen.clone_from(&c.typed.proc_title_template);
        }
    }

    /// After CONFIG SET: a new template is applied at once, as Redis's
    /// updateProcTitleTemplate does (whatever set-proc-title says).
    pub fn config_changed(&self, c: &Config) {
        let changed = self
            .inner
            .lock()
            .as_ref()
            .is_some_and(|(_, seen)| *seen != c.typed.proc_title_template);
        if changed {
            self.apply(c);
        }
    }
}

/// Redis's expandProcTitleTemplate (sdstemplate): `{var}` replaced, `{{` is a brace (a
/// lone `}` is copied as is), an unknown variable or unclosed `{` left out (CONFIG SET
/// refuses those), spaces trimmed at both ends.
pub fn expand(template: &str, title: &str, c: &Config) -> String {
    let t = &c.typed;
    let var = |name: &str| -> String {
        match name {
            "title" => title.to_string(),
            "listen-addr" if t.port != 0 || t.tls_port != 0 => {
                let addr = t.bind.split_whitespace().next().unwrap_or("*");
                let port = if t.port != 0 { t.port } else { t.tls_port };
                format!("{addr}:{port}")
            }
            "listen-addr" => format!("unixsocket:{}", t.unixsocket),
            "server-mode" if t.cluster_enabled => "[cluster]".into(),
            "server-mode" => String::new(),
            "config-file" => match &c.file {
                Some(f) => std::path::absolute(f)
                    .unwrap_or_else(|_| f.clone())
                    .display()
                    .to_string(),
                None => "-".into(),
            },
            "port" => t.port.to_string(),
            "tls-port" => t.tls_port.to_string(),
            "unixsocket" => t.unixsocket.clone(),
            _ => String::new(),
        }
    };
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(after) = after.strip_prefix('{') {
            out.push('{');
            rest = after;
            continue;
        }
        let Some(end) = after.find('}') else {
            rest = "";
            break;
        };
        out.push_str(&var(&after[..end]));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out.trim_matches(' ').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(directives: &[(&str, &str)]) -> Config {
        let cli: Vec<(String, Vec<String>)> = directives
            .iter()
            .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
            .collect();
        Config::load(None, &cli, []).expect("config")
    }

    /// The template's variables as Redis expands them.
    #[test]
    fn expands_like_redis() {
        let c = config(&[
            ("bind", "127.0.0.1 -::1"),
            ("port", "7000"),
            ("unixsocket", "/tmp/s"),
        ]);
        assert_eq!(
            expand(
                "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file}",
                "src/redis-server",
                &c
            ),
            "TEST src/redis-server 127.0.0.1:7000 7000 0 /tmp/s -"
        );
        assert_eq!(
            expand("{title} {listen-addr} {server-mode}", "x", &c),
            "x 127.0.0.1:7000"
        );
        assert_eq!(expand(" {{a}} ", "x", &c), "{a}}");
        let c = config(&[("port", "0"), ("unixsocket", "/tmp/s")]);
        assert_eq!(expand("{listen-addr}", "x", &c), "unixsocket:/tmp/s");
    }

    #[test]
    fn stat_bounds_skip_the_command_name() {
        let mut stat = String::from("12 (a b) c) S");
        for i in 4..=52 {
            stat.push_str(&format!(" {i}"));
        }
        assert_eq!(bounds(&stat), Some([48, 49, 50, 51]));
        assert_eq!(bounds("12 (x) S 1 2"), None);
    }
}
