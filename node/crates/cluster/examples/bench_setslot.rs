//! SETSLOT throughput: empty-slot moves between two met masters, the command sequence a
//! resharding tool sends per slot (IMPORTING on the target, MIGRATING on the source, NODE
//! on the target — saved and fsynced before its reply — then NODE on the source), from
//! `--clients` threads at once. Works against any server (tessera-node, redis-server).
//!
//! Usage: bench_setslot HOST:PORT(owner of all slots) HOST:PORT(empty master)
//!        [--slots 2000] [--clients 1]
//! Moves `--slots` slots from the first node to the second and back; prints SETSLOT/s.

use std::time::Instant;

use redis::Connection;

fn connect(addr: &str) -> Connection {
    let c = redis::Client::open(format!("redis://{addr}/")).expect("valid address");
    c.get_connection().expect("connect")
}

fn myid(c: &mut Connection) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(c)
        .expect("CLUSTER MYID")
}

fn setslot(c: &mut Connection, slot: usize, args: &[&str]) {
    let r: redis::RedisResult<()> = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(args)
        .query(c);
    if let Err(e) = r {
        panic!("SETSLOT {slot} {args:?}: {e}");
    }
}

/// Moves `slots` from the node behind `src` to the one behind `dst`; 4 SETSLOTs per slot.
fn move_slots(src: &str, dst: &str, slots: &[usize]) {
    let (mut s, mut d) = (connect(src), connect(dst));
    let (sid, did) = (myid(&mut s), myid(&mut d));
    for &slot in slots {
        setslot(&mut d, slot, &["IMPORTING", &sid]);
        setslot(&mut s, slot, &["MIGRATING", &did]);
        setslot(&mut d, slot, &["NODE", &did]);
        setslot(&mut s, slot, &["NODE", &did]);
    }
}

fn run(src: &str, dst: &str, slots: usize, clients: usize) -> f64 {
    let all: Vec<usize> = (0..slots).collect();
    let per = slots.div_ceil(clients.max(1));
    let start = Instant::now();
    std::thread::scope(|sc| {
        for chunk in all.chunks(per) {
            sc.spawn(move || move_slots(src, dst, chunk));
        }
    });
    (slots * 4) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let v: Vec<String> = std::env::args().skip(1).collect();
    let (Some(a), Some(b)) = (v.first(), v.get(1)) else {
        eprintln!("usage: bench_setslot HOST:PORT HOST:PORT [--slots N] [--clients C]");
        std::process::exit(2);
    };
    let opt = |name: &str, def: usize| {
        v.iter()
            .position(|x| x == name)
            .and_then(|i| v.get(i + 1))
            .and_then(|x| x.parse().ok())
            .unwrap_or(def)
    };
    let slots = opt("--slots", 2000).min(16384);
    let clients = opt("--clients", 1);
    let there = run(a, b, slots, clients);
    let back = run(b, a, slots, clients);
    println!(
        "clients {clients}: {:.0} SETSLOT/s ({} slots there and back)",
        (there + back) / 2.0,
        slots
    );
}
