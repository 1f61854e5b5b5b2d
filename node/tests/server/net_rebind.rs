//! CONFIG SET port / bind at run time, against redis-server 7.0 (issue 18,
//! unit/networking): the listeners move, connections already open stay, and a port or
//! address that cannot be bound answers Redis's error and keeps the old listener.

use tessera_testkit::*;

fn both() -> [Launch; 2] {
    [Launch::redis(), Launch::tessera()]
}

fn port_reply(port: u16) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(b"port".to_vec()),
        Reply::Bulk(port.to_string().into_bytes()),
    ])
}

/// PING on a new connection to `port`, or why it could not connect.
fn ping(port: u16) -> String {
    match Conn::try_connect(port) {
        Ok(mut c) => format!("{:?}", c.cmd(&["PING"])),
        Err(e) => format!("connect: {}", e.kind()),
    }
}

/// What one server does through the moves; compared whole between the two servers.
fn rebind_story(s: &Server) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = s.resp();
    let new_port = free_port();
    out.push(format!(
        "set port: {:?}",
        c.cmd(&["CONFIG", "SET", "port", &new_port.to_string()])
    ));
    out.push(format!("same conn after move: {:?}", c.cmd(&["PING"])));
    out.push(format!(
        "old port refuses: {}",
        Conn::try_connect(s.port).is_err()
    ));
    out.push(format!("new port: {}", ping(new_port)));
    let Ok(mut n) = Conn::try_connect(new_port) else {
        return out;
    };
    out.push(format!(
        "CONFIG GET port is the new one: {}",
        n.cmd(&["CONFIG", "GET", "port"]) == port_reply(new_port)
    ));
    // A port already in use (held by this test): Redis's error, the old listener stays.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let busy = held.local_addr().map(|a| a.port()).unwrap_or(0);
    out.push(format!(
        "busy port: {:?}",
        n.cmd(&["CONFIG", "SET", "port", &busy.to_string()])
    ));
    out.push(format!(
        "port kept after busy: {}",
        n.cmd(&["CONFIG", "GET", "port"]) == port_reply(new_port)
    ));
    out.push(format!("still listening after busy: {:?}", ping(new_port)));
    // A bad address: Redis's error, the old listener stays.
    out.push(format!(
        "bad bind: {:?}",
        n.cmd(&["CONFIG", "SET", "bind", "999.999.999.999"])
    ));
    out.push(format!(
        "bind kept: {:?}",
        n.cmd(&["CONFIG", "GET", "bind"])
    ));
    out.push(format!(
        "still listening after bad bind: {:?}",
        ping(new_port)
    ));
    // More than 16 addresses, and an address holding a NUL byte: refused, nothing changes.
    let seventeen: Vec<String> = (1..=17).map(|i| format!("127.0.0.{i}")).collect();
    out.push(format!(
        "too many binds: {:?}",
        n.cmd(&["CONFIG", "SET", "bind", &seventeen.join(" ")])
    ));
    out.push(format!(
        "nul bind: {:?}",
        n.cmd(&["CONFIG", "SET", "bind", "127.0.0.1 127.0.0.1\0x"])
    ));
    out.push(format!(
        "bind kept after refusals: {:?}",
        n.cmd(&["CONFIG", "GET", "bind"])
    ));
    // Several addresses, optional ones unavailable (no such local address), rebinding the same port.
    out.push(format!(
        "multi bind: {:?}",
        n.cmd(&["CONFIG", "SET", "bind", "127.0.0.1 -::1 -192.0.2.1"])
    ));
    out.push(format!("after multi bind: {:?}", ping(new_port)));
    // No address: nothing new can connect, the open connection still works.
    out.push(format!(
        "empty bind: {:?}",
        n.cmd(&["CONFIG", "SET", "bind", ""])
    ));
    out.push(format!(
        "refused with no bind: {}",
        Conn::try_connect(new_port).is_err()
    ));
    out.push(format!(
        "get empty bind: {:?}",
        n.cmd(&["CONFIG", "GET", "bind"])
    ));
    out.push(format!(
        "bind back: {:?}",
        n.cmd(&["CONFIG", "SET", "bind", "*"])
    ));
    out.push(format!("after bind *: {:?}", ping(new_port)));
    out.push(format!("first conn at the end: {:?}", c.cmd(&["PING"])));
    drop(held);
    out
}

#[test]
fn config_set_port_and_bind_rebind_like_redis() {
    let [r, t] = both().map(|l| l.args(&["--save", ""]).start());
    let (want, got) = (rebind_story(&r), rebind_story(&t));
    assert_eq!(got, want, "tessera (left) vs redis-server (right)");
}
