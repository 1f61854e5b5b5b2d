//! The Lua debugger (LDB) in SCRIPT DEBUG SYNC mode, as Redis 7.0's (eval.c): the next
//! EVAL of the client that asked for it runs under a line hook that stops at the first line
//! and at breakpoints; while stopped, the debugger talks to that client directly over its
//! socket (the I/O thread is inside the script, as Redis's whole server is): it sends the
//! accumulated log lines as an array of status replies and reads one debugger command at a
//! time (`step`, `continue`, `list`, `print`, `break`, `eval`, `redis`, `abort`...). When
//! the script ends, `<endsession>` is sent, then the EVAL's own reply, and the connection
//! closes. The dataset changes the script made are kept (SYNC mode has no rollback).
//!
//! SCRIPT DEBUG YES (Redis forks a child per session, so nothing the script does is kept)
//! is refused: a multi-threaded process cannot fork a copy of itself to run the script in.

use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Function, Lua, MultiValue, Value};

use super::RunSlot;
use crate::resp::parser::c_atoi as atoi;
use crate::server::clients::ClientHandle;
use crate::server::Server;

/// Breakpoints a session holds at most (Redis's LDB_BREAKPOINTS_MAX).
const MAX_BREAKPOINTS: usize = 64;
/// Default trim of logged replies and value dumps (LDB_MAX_LEN_DEFAULT).
const MAXLEN_DEFAULT: usize = 256;
/// Unparsed debugger input kept at most: past it the script fails (Redis's 1 MB).
const MAX_INPUT: usize = 1 << 20;
/// A reply write to the debugging client gives up after this (Redis's connSendTimeout).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Nested tables printed at most (LDB_MAX_VALUES_DEPTH, LUA_MINSTACK / 2).
const MAX_DEPTH: usize = 10;
/// Lua instructions between two timeout checks while the script runs freely.
const COUNT_EVERY: u32 = 100_000;

/// The errors the debugger stops the script with (the script fails with "ERR <msg>").
const ABORTED: &str = "script aborted for user request";
const PROTOCOL_ERROR: &str = "protocol error";
const INPUT_TOO_BIG: &str = "max client buffer reached";
const GONE_IN_TIMEOUT: &str = "timeout during Lua debugging with client closing connection";

/// One debugging session: the client's socket and the debugger's state (Redis's `ldb`).
pub(crate) struct Session {
    fd: RawFd,
    srv: Arc<Server>,
    handle: Arc<ClientHandle>,
    /// Log lines not yet sent to the client.
    logs: Vec<Vec<u8>>,
    /// Breakpoint line numbers, in the order they were set.
    bp: Vec<i32>,
    /// Stop at the next line whatever the breakpoints (also: log redis.call traffic).
    pub(crate) step: bool,
    /// redis.breakpoint() was called: stop at the next line.
    luabp: bool,
    /// The script's source, one entry per line.
    src: Vec<Vec<u8>>,
    currentline: i32,
    /// Debugger input read and not yet parsed.
    cbuf: Vec<u8>,
    /// Trim of logged replies and value dumps (0: none).
    maxlen: usize,
    maxlen_hint_sent: bool,
    /// When the script last resumed: a run past the time limit stops ("infinite loop?").
    resumed: Instant,
    limit: Duration,
}

impl Session {
    /// A session for the client `handle` (socket `fd`) debugging `body`; `threshold_ms`:
    /// busy-reply-threshold (0: Redis's 5 s) before a running script is stopped.
    pub(crate) fn new(
        fd: RawFd,
        srv: Arc<Server>,
        handle: Arc<ClientHandle>,
        body: &[u8],
        threshold_ms: u64,
    ) -> Self {
        let mut end = body.len();
        while end > 0 && matches!(body[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        let src = if end == 0 {
            Vec::new()
        } else {
            body[..end]
                .split(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect()
        };
        let limit = if threshold_ms == 0 {
            5000
        } else {
            threshold_ms
        };
        Session {
            fd,
            srv,
            handle,
            logs: Vec::new(),
            bp: Vec::new(),
            step: true,
            luabp: false,
            src,
            currentline: 0,
            cbuf: Vec::new(),
            maxlen: MAXLEN_DEFAULT,
            maxlen_hint_sent: false,
            resumed: Instant::now(),
            limit: Duration::from_millis(limit),
        }
    }

    /// Whether redis.call traffic and errors are logged (Redis's ldbIsEnabled).
    pub(crate) fn logging(&self) -> bool {
        self.step
    }

    pub(crate) fn log(&mut self, entry: impl Into<Vec<u8>>) {
        self.logs.push(entry.into());
    }

    /// Logs `entry` trimmed to `maxlen`, with a hint the first time (ldbLogWithMaxLen).
    fn log_trimmed(&mut self, mut entry: Vec<u8>) {
        let mut trimmed = false;
        if self.maxlen != 0 && entry.len() > self.maxlen {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
            trimmed = true;
        }
        self.log(entry);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.");
        }
    }

    /// `<redis> cmd args...` (the first ten arguments) before a redis.call runs.
    pub(crate) fn log_command(&mut self, argv: &[&[u8]]) {
        let mut l = b"<redis>".to_vec();
        for (j, a) in argv.iter().enumerate() {
            if j == 10 {
                l.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
                break;
            }
            l.push(b' ');
            l.extend_from_slice(a);
        }
        self.log(l);
    }

    /// `<reply> ...`: a command's RESP reply in human form.
    /// Redis converts the reply to Lua first, which logs each error in it as
    /// `<error> -<msg>`.
    pub(crate) fn log_reply(&mut self, reply: &[u8]) {
        let mut l = b"<reply> ".to_vec();
        let mut errors = Vec::new();
        human_reply(&mut l, reply, 0, &mut errors);
        for e in errors {
            let mut m = b"<error> ".to_vec();
            m.extend_from_slice(&e);
            self.log(m);
        }
        self.log_trimmed(l);
    }

    /// `<error> ...`: a redis.call refused before it ran. Redis logs the bare message of
    /// its own script errors and the protocol form ("-CODE msg\r\n") of shared ones.
    pub(crate) fn log_call_error(&mut self, msg: &str) {
        let l = match msg.strip_prefix("ERR ") {
            Some(m) => format!("<error> {m}"),
            None => format!("<error> -{msg}\r\n"),
        };
        self.log(l);
    }

    /// Sends the pending log lines as one array of status replies (ldbSendLogs). Write
    /// errors are left for the next read to notice, as Redis does.
    fn send_logs(&mut self) {
        let mut proto = format!("*{}\r\n", self.logs.len()).into_bytes();
        for l in self.logs.drain(..) {
            proto.push(b'+');
            proto.extend(
                l.iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
            proto.extend_from_slice(b"\r\n");
        }
        if write_all(self.fd, &proto) {
            self.srv
                .stats
                .net_output_bytes
                .fetch_add(proto.len() as u64, Ordering::Relaxed);
        }
    }

    /// Sends what is left and the end mark (ldbEndSession); the EVAL's reply follows.
    pub(crate) fn end(mut self) {
        self.log("<endsession>");
        self.send_logs();
        tracing::warn!("Redis synchronous debugging eval session ended");
    }

    fn source_line(&self, line: i32) -> &[u8] {
        usize::try_from(line - 1)
            .ok()
            .and_then(|i| self.src.get(i))
            .map_or(b"<out of range source code line>", |l| l.as_slice())
    }

    fn is_breakpoint(&self, line: i32) -> bool {
        self.bp.contains(&line)
    }

    fn log_source_line(&mut self, line: i32) {
        let prefix = match (self.currentline == line, self.is_breakpoint(line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut l = format!("{prefix}{line:<3} ").into_bytes();
        l.extend_from_slice(self.source_line(line));
        self.log(l);
    }

    /// The source around `around` (`context` lines each side), or all of it (around 0).
    fn list(&mut self, around: i32, context: i32) {
        let lines = i32::try_from(self.src.len()).unwrap_or(i32::MAX);
        for j in 1..=lines {
            if around != 0 && (i64::from(around) - i64::from(j)).abs() > i64::from(context) {
                continue;
            }
            self.log_source_line(j);
        }
    }

    /// `break` with its arguments (ldbBreak).
    fn breakpoints(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.bp.is_empty() {
                self.log("No breakpoints set. Use 'b <line>' to add one.");
            } else {
                self.log(format!("{} breakpoints set:", self.bp.len()));
                for l in self.bp.clone() {
                    self.log_source_line(l);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = string2l(arg) else {
                let mut l = b"Invalid argument:'".to_vec();
                l.extend_from_slice(cstr(arg));
                l.push(b'\'');
                self.log(l);
                continue;
            };
            if line == 0 {
                self.bp.clear();
                self.log("All breakpoints removed.");
            } else if line > 0 {
                let lines = self.src.len() as i64;
                if self.bp.len() == MAX_BREAKPOINTS {
                    self.log("Too many breakpoints set.");
                } else if line <= lines && !self.is_breakpoint(line as i32) {
                    self.bp.push(line as i32);
                    self.list(line as i32, 1);
                } else {
                    self.log("Wrong line number.");
                }
            } else {
                // Redis's ldbDelBreakpoint also shifts the later entries with a byte
                // count instead of an entry count; here the list stays intact.
                let target = line.checked_neg().and_then(|l| i32::try_from(l).ok());
                match target.and_then(|t| self.bp.iter().position(|&b| b == t)) {
                    Some(i) => {
                        self.bp.remove(i);
                        self.log("Breakpoint removed.");
                    }
                    None => self.log("No breakpoint in the specified line."),
                }
            }
        }
    }

    /// `maxlen [len]` (ldbMaxlen).
    fn set_maxlen(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut n = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if n != 0 && n <= 60 {
                n = 60;
            }
            self.maxlen = usize::try_from(n).unwrap_or(0);
        }
        if self.maxlen != 0 {
            self.log(format!(
                "<value> replies are truncated at {} bytes.",
                self.maxlen
            ));
        } else {
            self.log("<value> replies are unlimited.");
        }
    }

    fn help(&mut self) {
        for l in HELP {
            self.log(*l);
        }
    }

    /// Reads more debugger input into `cbuf`: false when the client is gone (closed, an
    /// error, killed). Blocks, as Redis's debugger does, in short polls.
    fn read_more(&mut self) -> bool {
        let mut buf = [0u8; 1024];
        loop {
            if self.handle.killed.load(Ordering::Relaxed) {
                return false;
            }
            let mut p = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the length of the call.
            let r = unsafe { libc::poll(&mut p, 1, 100) };
            if r < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return false;
            }
            if r == 0 {
                continue;
            }
            // SAFETY: `buf` is valid for its length; the socket is non-blocking.
            let n = unsafe {
                libc::recv(
                    self.fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error().kind();
                if matches!(
                    e,
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) {
                    continue;
                }
                return false;
            }
            if n == 0 {
                return false;
            }
            let n = n as usize;
            self.cbuf.extend_from_slice(&buf[..n]);
            self.srv
                .stats
                .net_input_bytes
                .fetch_add(n as u64, Ordering::Relaxed);
            return true;
        }
    }
}

/// Writes all of `data` to the non-blocking socket `fd`, waiting up to [`SEND_TIMEOUT`]
/// for room each time it is full. False if it could not.
fn write_all(fd: RawFd, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        // SAFETY: `data` is valid for its length.
        let n = unsafe {
            libc::send(
                fd,
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n > 0 {
            data = &data[n as usize..];
            continue;
        }
        let e = std::io::Error::last_os_error().kind();
        if n < 0 && e == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n == 0 || e != std::io::ErrorKind::WouldBlock {
            return false;
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the length of the call.
        let r = unsafe { libc::poll(&mut p, 1, SEND_TIMEOUT.as_millis() as libc::c_int) };
        if r <= 0 {
            return false;
        }
    }
    true
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// The bytes of `b` up to its first NUL: what Redis's C string functions see of it.
fn cstr(b: &[u8]) -> &[u8] {
    memchr::memchr(0, b).map_or(b, |i| &b[..i])
}

/// Redis's string2l: an optional '-' and digits, no leading zeros, no blanks.
fn string2l(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || (s.starts_with('-') && digits == "0")
    {
        return None;
    }
    s.parse().ok()
}

/// What parsing the debugger's input found.
enum Parsed {
    Command(Vec<Vec<u8>>),
    More,
    Error,
}

/// Parses one `*<n>\r\n$<len>\r\n<arg>\r\n...` command from the start of the input, as
/// forgiving and as strict as Redis's ldbReplParseCommand (at most 1024 arguments of
/// 1..=1024 bytes; the header is scanned as a C string).
fn parse_command(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::More;
    }
    let c = cstr(buf);
    let Some(star) = memchr::memchr(b'*', c) else {
        return Parsed::Error;
    };
    let Some(eol) = memchr::memmem::find(&c[star..], b"\r\n").map(|i| star + i) else {
        return Parsed::More;
    };
    let argc = atoi(&buf[star + 1..eol]);
    if argc <= 0 || argc > 1024 {
        return Parsed::Error;
    }
    let mut p = eol + 2;
    let mut argv = Vec::with_capacity(argc as usize);
    while (argv.len() as i64) < argc {
        match buf.get(p) {
            None | Some(0) => return Parsed::More,
            Some(b'$') => {}
            Some(_) => return Parsed::Error,
        }
        let Some(eol) = memchr::memmem::find(cstr(&buf[p..]), b"\r\n").map(|i| p + i) else {
            return Parsed::More;
        };
        let len = atoi(&buf[p + 1..eol]);
        if len <= 0 || len > 1024 {
            return Parsed::Error;
        }
        let start = eol + 2;
        let end = start + len as usize;
        if end + 2 > buf.len() {
            return Parsed::More;
        }
        argv.push(buf[start..end].to_vec());
        if &buf[end..end + 2] != b"\r\n" {
            return Parsed::Error;
        }
        p = end + 2;
    }
    Parsed::Command(argv)
}

/// sdscatrepr: `s` quoted, with C escapes for the unprintable bytes.
fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// The RESP reply at `reply[pos..]` in the debugger's human form (ldbRedisProtocolToHuman);
/// returns the position after it. A type it does not know is skipped over as Redis does
/// (nothing written, nothing consumed). The error replies met are added to `errors`.
fn human_reply(out: &mut Vec<u8>, reply: &[u8], pos: usize, errors: &mut Vec<Vec<u8>>) -> usize {
    let Some(&t) = reply.get(pos) else {
        return pos;
    };
    let line_end = |from: usize| {
        memchr::memchr(b'\r', reply.get(from..).unwrap_or_default())
            .map_or(reply.len(), |i| from + i)
    };
    let eol = line_end(pos + 1);
    let head = reply.get(pos + 1..eol).unwrap_or_default();
    let next = (eol + 2).min(reply.len());
    let count = || {
        std::str::from_utf8(head)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0)
    };
    match t {
        b':' => {
            out.extend_from_slice(head);
            next
        }
        b'$' => {
            let n = count();
            if n < 0 {
                out.extend_from_slice(b"NULL");
                return next;
            }
            let end = next.saturating_add(n as usize).min(reply.len());
            repr(out, &reply[next..end]);
            (end + 2).min(reply.len())
        }
        b'+' | b'-' => {
            let line = reply.get(pos..eol).unwrap_or_default();
            if t == b'-' {
                errors.push(line.to_vec());
            }
            repr(out, line);
            next
        }
        b'*' | b'~' | b'%' => {
            let n = count();
            if t == b'*' && n < 0 {
                out.extend_from_slice(b"NULL");
                return next;
            }
            let (open, close): (&[u8], &[u8]) = match t {
                b'*' => (b"[", b"]"),
                b'~' => (b"~(", b")"),
                _ => (b"{", b"}"),
            };
            out.extend_from_slice(open);
            let mut p = next;
            for j in 0..n.max(0) {
                p = human_reply(out, reply, p, errors);
                if t == b'%' {
                    out.extend_from_slice(b" => ");
                    p = human_reply(out, reply, p, errors);
                }
                if j != n - 1 {
                    out.push(b',');
                }
            }
            out.extend_from_slice(close);
            p
        }
        b'_' => {
            out.extend_from_slice(b"(null)");
            next
        }
        b'#' => {
            out.extend_from_slice(if head.first() == Some(&b't') {
                b"#true"
            } else {
                b"#false"
            });
            next
        }
        b',' => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(head);
            next
        }
        _ => pos,
    }
}

/// C's `%g` of a Lua number.
fn fmt_number(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    crate::resp::writer::fmt_g(n, 6)
}

/// A Lua value as the debugger shows it (ldbCatStackValueRec): strings quoted, tables as
/// `{v; v}` (arrays) or `{[k]=v; ...}`, functions and the like by address.
pub(crate) fn cat_value(out: &mut Vec<u8>, v: &Value, level: usize) {
    if level == MAX_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let level = level + 1;
    match v {
        Value::String(s) => repr(out, &s.as_bytes()),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(fmt_number(*i as f64).as_bytes()),
        Value::Number(n) => out.extend_from_slice(fmt_number(*n).as_bytes()),
        Value::Nil => out.extend_from_slice(b"nil"),
        Value::Table(t) => {
            let mut expected = 1i64;
            let mut is_array = true;
            let mut as_array = Vec::new();
            let mut as_map = Vec::new();
            let r = t.for_each::<Value, Value>(|k, v| {
                let at_index = match &k {
                    Value::Integer(i) => *i == expected,
                    Value::Number(n) => *n == expected as f64,
                    _ => false,
                };
                is_array &= at_index;
                cat_value(&mut as_array, &v, level);
                as_array.extend_from_slice(b"; ");
                as_map.push(b'[');
                cat_value(&mut as_map, &k, level);
                as_map.extend_from_slice(b"]=");
                cat_value(&mut as_map, &v, level);
                as_map.extend_from_slice(b"; ");
                expected += 1;
                Ok(())
            });
            if r.is_err() {
                // Only a failing allocation stops the walk: show what was seen.
                tracing::debug!("the debugger could not walk a table");
            }
            let body = if is_array { as_array } else { as_map };
            out.push(b'{');
            out.extend_from_slice(body.strip_suffix(b"; ").unwrap_or(&body));
            out.push(b'}');
        }
        Value::Function(f) => pointer(out, "function", f.to_pointer()),
        Value::Thread(t) => pointer(out, "thread", t.to_pointer()),
        Value::LightUserData(p) => pointer(out, "light-userdata", p.0),
        other => pointer(out, "userdata", other.to_pointer()),
    }
}

fn pointer(out: &mut Vec<u8>, kind: &str, p: *const std::ffi::c_void) {
    out.extend_from_slice(format!("\"{kind}@{p:p}\"").as_bytes());
}

/// Installs the debugger's hook on `lua` for the session in `run` (every line, and every
/// [`COUNT_EVERY`] instructions for the time limit). `call` is redis.call, which the
/// `redis` debugger command runs.
pub(crate) fn install_hook(lua: &Lua, run: std::rc::Rc<RunSlot>, call: Function) {
    let triggers = mlua::HookTriggers::new()
        .every_line()
        .every_nth_instruction(COUNT_EVERY);
    let hook = move |lua: &Lua, d: &mlua::Debug| line_hook(lua, d, &run, &call);
    if let Err(e) = lua.set_hook(triggers, hook) {
        tracing::warn!(error = %e, "cannot install the Lua debugger hook");
    }
}

/// Where the running script stands, for the hook.
fn stop_reason(
    run: &RunSlot,
    line: i32,
    in_script: bool,
    count: bool,
) -> Option<(&'static str, bool)> {
    let mut g = run.ldb.borrow_mut();
    let s = g.as_mut()?;
    s.currentline = line;
    let bp = s.is_breakpoint(line) || s.luabp;
    if !in_script {
        return None;
    }
    let mut timeout = false;
    if count && !s.step && !bp {
        if s.resumed.elapsed() < s.limit {
            return None;
        }
        timeout = true;
        s.step = true;
    }
    if !(s.step || bp) {
        return None;
    }
    let reason = if bp {
        if s.luabp {
            "redis.breakpoint() called"
        } else {
            "break point"
        }
    } else if timeout {
        "timeout reached, infinite loop?"
    } else {
        "step over"
    };
    s.step = false;
    s.luabp = false;
    Some((reason, timeout))
}

/// The debugger's line hook (luaLdbLineHook): stops where asked and runs the REPL.
fn line_hook(
    lua: &Lua,
    d: &mlua::Debug,
    run: &RunSlot,
    call: &Function,
) -> mlua::Result<mlua::VmState> {
    let line = d.current_line().map_or(-1, |l| l as i32);
    let in_script = d
        .source()
        .short_src
        .is_some_and(|s| s.contains("user_script"));
    let count = d.event() == mlua::DebugEvent::Count;
    let Some((reason, timeout)) = stop_reason(run, line, in_script, count) else {
        return Ok(mlua::VmState::Continue);
    };
    with_session(run, |s| {
        s.log(format!("* Stopped at {line}, stop reason = {reason}"));
        s.log_source_line(line);
        s.send_logs();
    });
    match repl(lua, run, call) {
        Err(msg) => return Err(mlua::Error::RuntimeError(msg.into())),
        Ok(false) if timeout => {
            // The client left while the script loops: stop it, or nothing ever would.
            return Err(mlua::Error::RuntimeError(GONE_IN_TIMEOUT.into()));
        }
        Ok(_) => {}
    }
    with_session(run, |s| s.resumed = Instant::now());
    Ok(mlua::VmState::Continue)
}

/// Runs `f` on the session, if one is active (never across a Lua call: the callbacks the
/// call reaches log through the same cell).
fn with_session<R>(run: &RunSlot, f: impl FnOnce(&mut Session) -> R) -> Option<R> {
    run.ldb.borrow_mut().as_mut().map(f)
}

/// Reads and runs debugger commands until one resumes the script (ldbRepl). Ok(false):
/// the client is gone (the script then runs to its end without stopping); Err: the
/// script is to fail with that message.
fn repl(lua: &Lua, run: &RunSlot, call: &Function) -> Result<bool, &'static str> {
    loop {
        let argv = loop {
            let next = with_session(run, |s| match parse_command(&s.cbuf) {
                Parsed::Command(argv) => {
                    s.cbuf.clear();
                    Ok(Some(argv))
                }
                Parsed::Error => Err(PROTOCOL_ERROR),
                Parsed::More => {
                    if !s.read_more() {
                        s.step = false;
                        s.bp.clear();
                        return Ok(None);
                    }
                    if s.cbuf.len() > MAX_INPUT {
                        s.cbuf = Vec::new();
                        return Err(INPUT_TOO_BIG);
                    }
                    Ok(Some(Vec::new()))
                }
            });
            match next {
                None | Some(Ok(None)) => return Ok(false),
                Some(Err(e)) => return Err(e),
                Some(Ok(Some(argv))) if argv.is_empty() => continue,
                Some(Ok(Some(argv))) => break argv,
            }
        };
        let name = cstr(&argv[0]).to_ascii_lowercase();
        let is = |a: &str, b: &str| name == a.as_bytes() || name == b.as_bytes();
        if is("h", "help") {
            with_session(run, |s| {
                s.help();
                s.send_logs();
            });
        } else if is("s", "step") || is("n", "next") {
            with_session(run, |s| s.step = true);
            return Ok(true);
        } else if is("c", "continue") {
            return Ok(true);
        } else if is("t", "trace") {
            trace(lua, run);
            with_session(run, Session::send_logs);
        } else if is("m", "maxlen") {
            with_session(run, |s| {
                s.set_maxlen(&argv);
                s.send_logs();
            });
        } else if is("b", "break") {
            with_session(run, |s| {
                s.breakpoints(&argv);
                s.send_logs();
            });
        } else if is("e", "eval") {
            eval(lua, run, &argv);
            with_session(run, Session::send_logs);
        } else if is("a", "abort") {
            return Err(ABORTED);
        } else if argv.len() > 1 && is("r", "redis") {
            redis(lua, run, call, &argv);
            with_session(run, Session::send_logs);
        } else if is("p", "print") {
            if argv.len() == 2 {
                print_var(lua, run, cstr(&argv[1]));
            } else {
                print_all(lua, run);
            }
            with_session(run, Session::send_logs);
        } else if is("l", "list") {
            with_session(run, |s| {
                let mut around = s.currentline;
                let mut context = 5;
                if let Some(a) = argv.get(1) {
                    let n = atoi(a);
                    if n > 0 {
                        around = n as i32;
                    }
                }
                if let Some(c) = argv.get(2) {
                    context = atoi(c) as i32;
                }
                s.list(around, context);
                s.send_logs();
            });
        } else if is("w", "whole") {
            with_session(run, |s| {
                s.list(1, 1_000_000);
                s.send_logs();
            });
        } else {
            with_session(run, |s| {
                s.log("<error> Unknown Redis Lua debugger command or wrong number of arguments.");
                s.send_logs();
            });
        }
    }
}

/// `trace`: the script's frames, innermost first (ldbTrace).
fn trace(lua: &Lua, run: &RunSlot) {
    let mut level = 0;
    let mut frames = Vec::new();
    while let Some(f) = lua.inspect_stack(level, |d| {
        let in_script = d
            .source()
            .short_src
            .is_some_and(|s| s.contains("user_script"));
        let name = d.names().name.map(|n| n.into_owned());
        let line = d.current_line().map_or(-1, |l| l as i32);
        (in_script, name, line)
    }) {
        if f.0 {
            frames.push((level, f.1, f.2));
        }
        level += 1;
    }
    with_session(run, |s| {
        for (level, name, line) in frames {
            let name = name.as_deref().unwrap_or("top level");
            s.log(format!(
                "{} {name}:",
                if level == 0 { "In" } else { "From" }
            ));
            s.log_source_line(line);
        }
        if level == 0 {
            s.log("<error> Can't retrieve Lua stack.");
        }
    });
}

/// The message of a Lua error as `lua_tostring` shows it (no traceback, no wrapping).
fn error_text(e: &mlua::Error) -> String {
    let m = match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => super::innermost(other),
    };
    match m.find("\nstack traceback:") {
        Some(i) => m[..i].to_string(),
        None => m,
    }
}

/// `eval <code>`: compiles the code as an expression ("return <code>"), else as a
/// statement, runs it in its own frame and shows its value (ldbEval).
fn eval(lua: &Lua, run: &RunSlot, argv: &[Vec<u8>]) {
    let code = argv[1..].join(&b' ');
    let expr = [b"return ".as_slice(), &code].concat();
    let load = |src: &[u8]| {
        lua.load(src)
            .set_name("@ldb_eval")
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
    };
    let f = match load(&expr).or_else(|_| load(&code)) {
        Ok(f) => f,
        Err(e) => {
            with_session(run, |s| s.log(format!("<error> {}", error_text(&e))));
            return;
        }
    };
    match f.call::<MultiValue>(()) {
        Ok(v) => {
            let mut l = b"<retval> ".to_vec();
            cat_value(&mut l, v.front().unwrap_or(&Value::Nil), 0);
            with_session(run, |s| s.log_trimmed(l));
        }
        Err(e) => {
            with_session(run, |s| s.log(format!("<error> {}", error_text(&e))));
        }
    }
}

/// `redis <cmd> <args...>`: runs the command through redis.call with logging on, so the
/// command and its reply are logged (ldbRedis). Its error, if any, was logged too.
fn redis(lua: &Lua, run: &RunSlot, call: &Function, argv: &[Vec<u8>]) {
    let args: mlua::Result<MultiValue> = argv[1..]
        .iter()
        .map(|a| lua.create_string(a).map(Value::String))
        .collect();
    with_session(run, |s| s.step = true);
    if let Ok(args) = args {
        let _ = call.call::<Value>(args);
    }
    with_session(run, |s| s.step = false);
}

/// The script's locals, as (name, value) pairs: all of the running function's (but the
/// temporaries) when `want` is None, else the first one named `want` from the running
/// function outward.
fn locals(lua: &Lua, want: Option<&[u8]>) -> Vec<(Vec<u8>, Value)> {
    use mlua::ffi;
    // SAFETY: the closure runs in mlua's protected call on the hooked thread, where level
    // 0 is that call's own C function and level 1 the script's running function. It only
    // reads the stack (lua_getstack / lua_getlocal, which push a value each, checked for
    // room) and leaves (name, value) pairs on it as results; it holds nothing that needs
    // Drop, so an error raised inside cannot skip a destructor.
    let r = unsafe {
        lua.exec_raw::<MultiValue>((), |l| {
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            let mut level = 1;
            'frames: while ffi::lua_getstack(l, level, &mut ar) != 0 {
                let mut i = 1;
                loop {
                    if ffi::lua_checkstack(l, 3) == 0 {
                        break 'frames;
                    }
                    let name = ffi::lua_getlocal(l, &ar, i);
                    if name.is_null() {
                        break;
                    }
                    i += 1;
                    let n = std::ffi::CStr::from_ptr(name).to_bytes();
                    let keep = match want {
                        Some(w) => n == w,
                        None => memchr::memmem::find(n, b"(*temporary)").is_none(),
                    };
                    if !keep {
                        ffi::lua_settop(l, -2);
                        continue;
                    }
                    ffi::lua_pushstring(l, name);
                    ffi::lua_insert(l, -2);
                    if want.is_some() {
                        break 'frames;
                    }
                }
                if want.is_none() {
                    break;
                }
                level += 1;
            }
        })
    };
    let mut out = Vec::new();
    let mut it = r.unwrap_or_default().into_iter();
    while let (Some(Value::String(n)), Some(v)) = (it.next(), it.next()) {
        out.push((n.as_bytes().to_vec(), v));
    }
    out
}

/// `print <var>` (ldbPrint): a local of the running function or of its callers, else
/// the globals KEYS and ARGV.
fn print_var(lua: &Lua, run: &RunSlot, name: &[u8]) {
    let found = locals(lua, Some(name)).into_iter().next().map(|(_, v)| v);
    let v = match found {
        Some(v) => Some(v),
        None if name == b"KEYS" || name == b"ARGV" => {
            let n = String::from_utf8_lossy(name);
            Some(lua.globals().get::<Value>(n.as_ref()).unwrap_or(Value::Nil))
        }
        None => None,
    };
    match v {
        Some(v) => {
            let mut l = b"<value> ".to_vec();
            cat_value(&mut l, &v, 0);
            with_session(run, |s| s.log_trimmed(l));
        }
        None => {
            with_session(run, |s| s.log("No such variable."));
        }
    }
}

/// `print` (ldbPrintAll): the running function's locals.
fn print_all(lua: &Lua, run: &RunSlot) {
    let vars = locals(lua, None);
    let lines: Vec<Vec<u8>> = vars
        .iter()
        .map(|(n, v)| {
            let mut l = b"<value> ".to_vec();
            l.extend_from_slice(n);
            l.extend_from_slice(b" = ");
            cat_value(&mut l, v, 0);
            l
        })
        .collect();
    with_session(run, |s| {
        if lines.is_empty() {
            s.log("No local variables in the current context.");
        }
        for l in lines {
            s.log_trimmed(l);
        }
    });
}

/// redis.breakpoint(): stop at the next line when a session is active.
pub(crate) fn breakpoint(run: &RunSlot) -> bool {
    with_session(run, |s| s.luabp = true).is_some()
}

/// redis.debug(...): `<debug> line N: v1, v2...` in the session's log.
pub(crate) fn debug(run: &RunSlot, args: &MultiValue) {
    if run.ldb.borrow().is_none() {
        return;
    }
    let mut vals = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            vals.extend_from_slice(b", ");
        }
        cat_value(&mut vals, a, 0);
    }
    with_session(run, |s| {
        let mut l = format!("<debug> line {}: ", s.currentline).into_bytes();
        l.extend_from_slice(&vals);
        s.log(l);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(b: &[u8]) -> Vec<Vec<u8>> {
        match parse_command(b) {
            Parsed::Command(a) => a,
            Parsed::More => panic!("more"),
            Parsed::Error => panic!("error"),
        }
    }

    #[test]
    fn parses_like_redis() {
        assert_eq!(cmd(b"*1\r\n$1\r\ns\r\n"), vec![b"s".to_vec()]);
        assert_eq!(
            cmd(b"*2\r\n$1\r\np\r\n$4\r\nKEYS\r\n"),
            vec![b"p".to_vec(), b"KEYS".to_vec()]
        );
        assert_eq!(cmd(b"*1\r\n$3\r\na\0b\r\n"), vec![b"a\0b".to_vec()]);
        assert!(matches!(parse_command(b"*1\r\n$1\r\n"), Parsed::More));
        assert!(matches!(parse_command(b"*1\r"), Parsed::More));
        assert!(matches!(parse_command(b"*0\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*1\r\n$0\r\n\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*1\r\n+x\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"hello"), Parsed::Error));
        assert!(matches!(parse_command(b"*1\r\n$1\r\nsXX"), Parsed::Error));
    }

    #[test]
    fn numbers_like_c() {
        assert_eq!(string2l(b"12"), Some(12));
        assert_eq!(string2l(b"-3"), Some(-3));
        assert_eq!(string2l(b"012"), None);
        assert_eq!(string2l(b" 1"), None);
        assert_eq!(fmt_number(1e6), "1e+06");
        assert_eq!(fmt_number(3.5), "3.5");
    }

    #[test]
    fn replies_in_human_form() {
        let h = |r: &[u8]| {
            let mut o = Vec::new();
            human_reply(&mut o, r, 0, &mut Vec::new());
            String::from_utf8(o).unwrap_or_default()
        };
        assert_eq!(h(b"+OK\r\n"), "\"+OK\"");
        assert_eq!(h(b"-ERR x\r\n"), "\"-ERR x\"");
        assert_eq!(h(b":5\r\n"), "5");
        assert_eq!(h(b"$-1\r\n"), "NULL");
        assert_eq!(h(b"*2\r\n$1\r\na\r\n:1\r\n"), "[\"a\",1]");
        assert_eq!(h(b"%1\r\n+a\r\n#t\r\n"), "{\"+a\" => #true}");
        assert_eq!(h(b"~1\r\n,1.5\r\n"), "~((double) 1.5)");
        assert_eq!(h(b"_\r\n"), "(null)");
    }
}
