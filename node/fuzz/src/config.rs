//! redis.conf text and CONFIG SET values.

use std::path::PathBuf;

use tessera_node::config::{find, Config, Kind, DIRECTIVES};

/// A scratch config file for CONFIG REWRITE, one per process and thread (tests replay the
/// targets on parallel threads).
fn scratch_file() -> PathBuf {
    let thread = format!("{:?}", std::thread::current().id());
    let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
    std::env::temp_dir().join(format!(
        "tessera-fuzz-rewrite-{}-{thread}.conf",
        std::process::id()
    ))
}

/// CONFIG REWRITE must write a file that loads back to the same settings: a node whose
/// settings cannot be reloaded does not restart.
fn check_rewrite(c: &Config) {
    let path = scratch_file();
    std::fs::write(&path, "").expect("scratch config file");
    let mut c = c.clone();
    c.file = Some(path.clone());
    c.rewrite().expect("CONFIG REWRITE into a scratch file");
    let text = std::fs::read_to_string(&path).expect("read back the rewritten file");
    let _ = std::fs::remove_file(&path);
    let mut back = Config::default();
    if let Err(e) = back.apply_text(&text, Some("rewritten.conf".into())) {
        panic!("the rewritten config does not load: {e}\n{text}");
    }
    for d in DIRECTIVES {
        if d.name == "dir" {
            continue;
        }
        assert_eq!(
            back.get(d.name),
            c.get(d.name),
            "{} changed by CONFIG REWRITE and reload:\n{text}",
            d.name
        );
    }
}

/// True when a line of `text` would be an `include` directive once unquoted (as the parser
/// reads it): the fuzzer would make the parser read arbitrary files of this machine.
fn names_include(text: &str) -> bool {
    text.lines().any(|l| {
        tessera_node::resp::parser::split_args(l.trim().as_bytes())
            .and_then(|w| w.into_iter().next())
            .is_some_and(|w| w.eq_ignore_ascii_case(b"include"))
    })
}

/// A redis.conf file (startup); what loads must survive CONFIG REWRITE and a reload.
pub fn config_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if names_include(&text) {
        return;
    }
    let mut c = Config::default();
    if c.apply_text(&text, Some("fuzz.conf".into())).is_err() {
        return;
    }
    check_rewrite(&c);
}

/// CONFIG SET of up to four `name value` lines, applied as the command does (all or nothing
/// on a copy; the value is the rest of the line, split on spaces for the directives that
/// take several words), then CONFIG GET of each and the rewrite round trip.
pub fn config_set(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut c = Config::default();
    let mut set = Vec::new();
    for line in text.split('\n').take(4) {
        let (name, val) = line.split_once(' ').unwrap_or((line, ""));
        let name = name.to_ascii_lowercase();
        let Some(d) = find(&name) else {
            return;
        };
        if d.immutable {
            return;
        }
        let vals: Vec<String> = match d.kind {
            Kind::Special => val.split_whitespace().map(String::from).collect(),
            _ => vec![val.to_string()],
        };
        if c.set_directive(&name, &vals).is_err() {
            return;
        }
        set.push(d.name);
    }
    for name in set {
        let shown = c.get(name).expect("a set directive has a value");
        // CONFIG GET's answer is accepted by CONFIG SET and changes nothing.
        let vals: Vec<String> = match find(name).map(|d| &d.kind) {
            Some(Kind::Special) => shown.split_whitespace().map(String::from).collect(),
            _ => vec![shown.clone()],
        };
        let mut again = c.clone();
        if let Err(e) = again.set_directive(name, &vals) {
            panic!("CONFIG SET {name} of its own CONFIG GET value {shown:?} failed: {e}");
        }
        assert_eq!(
            again.get(name),
            Some(shown),
            "CONFIG SET {name} of its CONFIG GET value"
        );
    }
    check_rewrite(&c);
}
