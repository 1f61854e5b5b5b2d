//! SAVE and load of N keys: redis-server 7.0 next to tessera-rdb, same data, same run.
//!
//! redis-server fills itself with `DEBUG POPULATE` plus a share of hashes, lists, sets and
//! zsets, then SAVEs (timed) and reloads (`DEBUG RELOAD NOSAVE`, timed). tessera-rdb parses the
//! very same dump.rdb (timed) and writes it back with `write_atomic` (timed, fsync included).
//! Our "load" is parsing into `RdbEntry` values, without a keyspace to insert into, so it is a
//! lower bound for the node's load time; the ratios say how much room the node has.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn free_port() -> u16 {
    (16900..16999)
        .find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port in 16900-16998")
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed())
}

fn main() {
    let keys: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    // DEBUG POPULATE pads values with zero bytes: sizes over 20 exercise LZF.
    let value_size: u64 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16);
    let dir = std::env::temp_dir().join(format!("tessera-rdb-perf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let port = free_port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args([
            "--dir",
            &dir.display().to_string(),
            "--enable-debug-command",
            "yes",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    let _server = Server(child);
    while cli(port, &["PING"]) != "PONG" {
        std::thread::sleep(Duration::from_millis(20));
    }
    // 90% strings, 10% small collections in their compact encodings.
    let strings = keys * 9 / 10;
    cli(
        port,
        &[
            "DEBUG",
            "POPULATE",
            &strings.to_string(),
            "key",
            &value_size.to_string(),
        ],
    );
    let coll = (keys - strings).to_string();
    let script = "for i=1,tonumber(ARGV[1]) do local t=i%4 \
        if t==0 then redis.call('hset','h:'..i,'a',i,'b','x'..i,'c','y') \
        elseif t==1 then redis.call('rpush','l:'..i,'a',i,'b','c'..i) \
        elseif t==2 then redis.call('sadd','s:'..i,i,i+1,i+2) \
        else redis.call('zadd','z:'..i,i,'m1',i/3,'m2') end end return 1";
    cli(port, &["EVAL", script, "0", &coll]);
    let dbsize = cli(port, &["DBSIZE"]);

    let (_, redis_save) = timed(|| cli(port, &["SAVE"]));
    let (_, redis_load) = timed(|| cli(port, &["DEBUG", "RELOAD", "NOSAVE"]));
    let dump = dir.join("dump.rdb");
    let size = std::fs::metadata(&dump).map(|m| m.len()).unwrap_or(0);

    let (entries, our_load) = timed(|| {
        let f = std::fs::File::open(&dump).expect("open dump.rdb");
        tessera_rdb::read_entries(std::io::BufReader::with_capacity(1 << 20, f))
            .expect("read redis dump.rdb")
    });
    let ours = dir.join("ours.rdb");
    let (written, our_save) = timed(|| {
        tessera_rdb::write_atomic(Path::new(&ours), |w| {
            w.standard_aux(&tessera_rdb::AuxInfo::default())?;
            w.select_db(0, entries.len() as u64, 0)?;
            for e in &entries {
                w.entry(&e.key, &e.value, e.expire_ms)?;
            }
            Ok(())
        })
        .expect("write")
    });
    let check = Command::new("redis-check-rdb")
        .arg(&ours)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("# tessera-rdb vs redis-server 7.0: {dbsize} keys, {value_size}-byte string values");
    println!("| step | tessera-rdb ms | redis ms | ratio (tessera/redis) |");
    println!("|---|---|---|---|");
    println!(
        "| save (encode + write + fsync) | {:.0} | {:.0} | {:.2} |",
        ms(our_save),
        ms(redis_save),
        ms(our_save) / ms(redis_save)
    );
    println!(
        "| load (parse only vs full load) | {:.0} | {:.0} | {:.2} |",
        ms(our_load),
        ms(redis_load),
        ms(our_load) / ms(redis_load)
    );
    println!(
        "file size: redis {size} bytes, tessera {written} bytes; our file passes redis-check-rdb: {check}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
