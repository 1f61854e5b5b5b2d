//! Crash reports as Redis 7.0 (integration/logging): on DEBUG SEGFAULT, a SIGABRT from
//! outside, or DEBUG PANIC, the log gets Redis's bug report with a stack trace and the
//! process dies of the signal itself (exit status and core dump unchanged). Each scenario
//! runs on redis-server and tessera-node alike.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use tessera_testkit::{Launch, Server};

fn start(launch: Launch) -> Server {
    launch
        .args(&[
            "--crash-memcheck-enabled",
            "no",
            "--save",
            "",
            "--enable-debug-command",
            "yes",
        ])
        .logfile()
        .start()
}

fn launches() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

/// Runs `crash` on a fresh server and checks how it died and what its log says.
fn check(crash: impl Fn(&Server), signal: i32, expect_in_log: &[&str]) {
    for launch in launches() {
        let mut s = start(launch);
        let bin = s.bin().to_string();
        crash(&s);
        let status = s
            .wait_exit(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{bin} did not die"));
        assert_eq!(
            status.signal(),
            Some(signal),
            "{bin}: exit status {status:?}"
        );
        let log = std::fs::read_to_string(s.log_path().expect("log file")).unwrap_or_default();
        for want in expect_in_log {
            assert!(
                log.contains(want),
                "{bin}: {want:?} not in its log:\n{}",
                s.log_tail(60)
            );
        }
    }
}

const REPORT: &[&str] = &[
    "=== REDIS BUG REPORT START",
    "crashed by signal",
    "------ STACK TRACE ------",
    "=== REDIS BUG REPORT END",
];

#[test]
fn debug_segfault_reports_and_dies_of_sigsegv_like_redis() {
    check(
        |s| {
            let mut c = s.resp();
            c.send(&["DEBUG", "SEGFAULT"]);
        },
        libc::SIGSEGV,
        REPORT,
    );
}

#[test]
fn sigabrt_reports_and_dies_of_sigabrt_like_redis() {
    let mut want = REPORT.to_vec();
    want.push("Killed by PID");
    check(|s| s.signal("ABRT"), libc::SIGABRT, &want);
}

#[test]
fn debug_panic_reports_and_aborts_like_redis() {
    check(
        |s| {
            let mut c = s.resp();
            c.send(&["DEBUG", "PANIC"]);
        },
        libc::SIGABRT,
        &[
            "Guru Meditation: DEBUG PANIC called at Unix time",
            "------ STACK TRACE ------",
        ],
    );
}
