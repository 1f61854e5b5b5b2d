//! Crash report, as Redis 7.0's sigsegvHandler (debug.c): on SIGSEGV, SIGBUS, SIGFPE, SIGILL
//! or SIGABRT the node writes Redis's bug report (the "=== REDIS BUG REPORT START" banner,
//! "crashed by signal", "------ STACK TRACE ------" with the backtrace, the END banner) to
//! its log, then dies of the same signal with the default action, so the exit status and
//! any core dump are what they would be without the handler.
//!
//! Async-signal-safety: formatting the report and capturing/symbolising the backtrace
//! allocate and take locks, which POSIX does not allow in a handler. We accept that, as
//! Redis does (its handler calls backtrace(), malloc and its logger): a crash inside the
//! allocator or while another thread captures a backtrace may hang or lose the report.
//! The handler runs at most once (SA_RESETHAND puts the default action back on entry,
//! SA_NODEFER lets the final raise act at once), so a fault inside the handler itself
//! ends the process with the default action instead of looping. The handler runs on the
//! faulting thread's own stack (no SA_ONSTACK: std's guard-page alternate stack is too
//! small to symbolise on), so a stack overflow ends without a report.

use std::sync::atomic::{AtomicI32, Ordering};

/// The file descriptor the report goes to (the log file or stdout). A signal handler can
/// only find its state through a process-wide static; this is the only one.
static LOG_FD: AtomicI32 = AtomicI32::new(libc::STDOUT_FILENO);

const SIGNALS: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// Installs the handler for Redis's crash signals; the report is written to `fd`, which
/// must stay open for the life of the process (the log file is never closed).
pub fn install(fd: libc::c_int) -> std::io::Result<()> {
    LOG_FD.store(fd, Ordering::Relaxed);
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction is a valid value; the handler has the SA_SIGINFO
        // signature and sa_mask is initialised with sigemptyset before use.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_NODEFER;
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let report = report(sig, info);
    write_all(LOG_FD.load(Ordering::Relaxed), report.as_bytes());
    // SAFETY: the default action was put back on entry (SA_RESETHAND) and the signal is
    // not blocked (SA_NODEFER), so this ends the process with `sig` as Redis's
    // bugReportEnd does with kill(getpid(), sig).
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// Redis's report text, with our backtrace in the STACK TRACE section.
fn report(sig: libc::c_int, info: *mut libc::siginfo_t) -> String {
    use std::fmt::Write;
    let pid = std::process::id();
    let mut r = String::with_capacity(8192);
    let _ = write!(
        r,
        "\n\n=== REDIS BUG REPORT START: Cut & paste starting from here ===\n\
         {pid}:M # Redis {} crashed by signal: {sig}, si_code: ",
        tessera_node::REDIS_VERSION
    );
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler; null is checked.
    if let Some(info) = unsafe { info.as_ref() } {
        let _ = writeln!(r, "{}", info.si_code);
        if sig == libc::SIGSEGV || sig == libc::SIGBUS {
            // SAFETY: si_addr is the union member the kernel fills for these signals.
            let _ = writeln!(r, "{pid}:M # Accessing address: {:p}", unsafe {
                info.si_addr()
            });
        }
        if info.si_code == libc::SI_USER {
            // SAFETY: SI_USER means a kill(2), whose sender fields are filled.
            let (spid, uid) = unsafe { (info.si_pid(), info.si_uid()) };
            let _ = writeln!(r, "{pid}:M # Killed by PID: {spid}, UID: {uid}");
        }
    } else {
        r.push_str("0\n");
    }
    let bt = std::backtrace::Backtrace::force_capture();
    let _ = write!(
        r,
        "\n------ STACK TRACE ------\n\nBacktrace:\n{bt}\n\
         \n=== REDIS BUG REPORT END. Make sure to include from START to END. ===\n\n"
    );
    r
}

/// write(2) until done or an error: the only I/O a handler should do.
fn write_all(fd: libc::c_int, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: buf is a live slice; write(2) is async-signal-safe.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let n = usize::try_from(n).unwrap_or(0);
        if n == 0 {
            return;
        }
        buf = buf.get(n..).unwrap_or_default();
    }
}
