//! Randomized differential test of the stream commands against redis-server 7.0.15: fixed
//! seeds, a few thousand generated commands (valid and not) over three streams, two groups
//! and three consumers; every reply must equal redis's once clock-dependent fields (idle,
//! seen and delivery times) and the radix-tree estimates are masked.

use tessera_testkit::diff::*;

/// Replaces what depends on the clock or on redis's rax layout with a marker.
fn mask(r: &Reply) -> Reply {
    tessera_testkit::diff::mask_times(r, &["seen-time", "idle"])
}

struct Gen {
    rng: Rng,
    /// Next millisecond part of the IDs the generator adds (mostly increasing).
    ms: u64,
    /// Long streams: MAXLEN up to 300 and values up to 300 bytes, so entries span many
    /// of tessera's 100-entry / 4 KiB blocks.
    big: bool,
}

impl Gen {
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.rng.below(v.len() as u64) as usize]
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.rng.below(100) < pct
    }
    fn key(&mut self) -> String {
        self.pick(&["s0", "s1", "s2", "s0", "s1"]).to_string()
    }
    fn group(&mut self) -> String {
        self.pick(&["g0", "g1", "g0", "gx"]).to_string()
    }
    fn consumer(&mut self) -> String {
        self.pick(&["c0", "c1", "c2"]).to_string()
    }
    /// An existing-looking ID around the ones added so far.
    fn id(&mut self) -> String {
        match self.rng.below(10) {
            0 => "0".into(),
            1 => "-".into(),
            2 => "+".into(),
            3 => format!("{}", self.rng.below(self.ms + 2)),
            _ => format!("{}-{}", self.rng.below(self.ms + 2), self.rng.below(3)),
        }
    }
    fn strict_id(&mut self) -> String {
        format!("{}-{}", self.rng.below(self.ms + 2), self.rng.below(3))
    }
    fn trim(&mut self, a: &mut Vec<String>) {
        let strategy = self.pick(&["MAXLEN", "MINID", "maxlen"]);
        a.push(strategy.into());
        match self.rng.below(3) {
            0 => a.push("=".into()),
            1 => a.push("~".into()),
            _ => {}
        }
        if strategy == "MINID" {
            a.push(self.strict_id());
        } else {
            a.push(self.rng.below(if self.big { 300 } else { 12 }).to_string());
        }
        if self.chance(20) {
            a.push("LIMIT".into());
            a.push(self.rng.below(4).to_string());
        }
    }
    fn count(&mut self, a: &mut Vec<String>) {
        if self.chance(50) {
            a.push("COUNT".into());
            a.push(self.pick(&["0", "1", "2", "5", "-1"]).into());
        }
    }

    fn next(&mut self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let s = |x: &str| x.to_string();
        match self.rng.below(26) {
            0..=5 => {
                a.push(s("XADD"));
                a.push(self.key());
                if self.chance(5) {
                    a.push(s("NOMKSTREAM"));
                }
                if self.chance(25) {
                    self.trim(&mut a);
                }
                self.ms += self.rng.below(3);
                let id = match self.rng.below(10) {
                    0 => format!("{}-*", self.ms),
                    1 => self.id(),
                    _ => format!("{}-{}", self.ms, self.rng.below(3)),
                };
                a.push(id);
                for i in 0..=self.rng.below(2) {
                    a.push(format!("f{i}"));
                    let v = format!("v{}", self.rng.below(100));
                    a.push(if self.big && self.chance(20) {
                        v.repeat(1 + self.rng.below(100) as usize)
                    } else {
                        v
                    });
                }
            }
            6 => {
                a.push(s("XDEL"));
                a.push(self.key());
                for _ in 0..=self.rng.below(2) {
                    a.push(self.strict_id());
                }
            }
            7 => {
                a.push(s("XTRIM"));
                a.push(self.key());
                self.trim(&mut a);
            }
            8 => {
                a.push(s(self.pick(&["XRANGE", "XREVRANGE"])));
                a.push(self.key());
                let (x, y) = (self.id(), self.id());
                a.push(x);
                a.push(y);
                self.count(&mut a);
            }
            9 => {
                a.push(s("XREAD"));
                self.count(&mut a);
                a.push(s("STREAMS"));
                let (k1, k2) = (self.key(), self.key());
                a.extend([k1, k2]);
                let (i1, i2) = (self.strict_id(), self.id());
                a.extend([i1, i2]);
            }
            10..=13 => {
                a.push(s("XREADGROUP"));
                a.push(s("GROUP"));
                a.push(self.group());
                a.push(self.consumer());
                self.count(&mut a);
                if self.chance(20) {
                    a.push(s("NOACK"));
                }
                a.push(s("STREAMS"));
                a.push(self.key());
                a.push(if self.chance(70) {
                    s(">")
                } else {
                    self.strict_id()
                });
            }
            14 => {
                a.push(s("XACK"));
                a.push(self.key());
                a.push(self.group());
                for _ in 0..=self.rng.below(2) {
                    a.push(self.strict_id());
                }
            }
            15 => {
                a.push(s("XCLAIM"));
                a.push(self.key());
                a.push(self.group());
                a.push(self.consumer());
                a.push(s("0"));
                for _ in 0..=self.rng.below(2) {
                    a.push(self.strict_id());
                }
                if self.chance(30) {
                    a.push(s("JUSTID"));
                }
                if self.chance(15) {
                    a.push(s("FORCE"));
                }
                if self.chance(15) {
                    a.push(s("RETRYCOUNT"));
                    a.push(self.rng.below(5).to_string());
                }
                if self.chance(10) {
                    a.push(s("LASTID"));
                    a.push(self.strict_id());
                }
            }
            16 => {
                a.push(s("XAUTOCLAIM"));
                a.push(self.key());
                a.push(self.group());
                a.push(self.consumer());
                a.push(s("0"));
                a.push(self.id());
                self.count(&mut a);
                if self.chance(30) {
                    a.push(s("JUSTID"));
                }
            }
            17 => {
                a.push(s("XPENDING"));
                a.push(self.key());
                a.push(self.group());
                if self.chance(60) {
                    a.push(self.id());
                    a.push(self.id());
                    a.push(self.pick(&["10", "2", "0", "-1"]).into());
                    if self.chance(40) {
                        a.push(self.consumer());
                    }
                }
            }
            18 => {
                a.push(s("XSETID"));
                a.push(self.key());
                a.push(self.strict_id());
                if self.chance(30) {
                    a.push(s("ENTRIESADDED"));
                    a.push(self.rng.below(40).to_string());
                    a.push(s("MAXDELETEDID"));
                    a.push(self.strict_id());
                }
            }
            19..=21 => {
                a.push(s("XGROUP"));
                let sub = self.pick(&[
                    "CREATE",
                    "CREATE",
                    "SETID",
                    "DESTROY",
                    "CREATECONSUMER",
                    "DELCONSUMER",
                ]);
                a.push(s(sub));
                a.push(self.key());
                a.push(self.group());
                match sub {
                    "CREATE" | "SETID" => {
                        a.push(match self.rng.below(4) {
                            0 => s("$"),
                            1 => s("0"),
                            _ => self.strict_id(),
                        });
                        if sub == "CREATE" && self.chance(30) {
                            a.push(s("MKSTREAM"));
                        }
                        if self.chance(20) {
                            a.push(s("ENTRIESREAD"));
                            a.push(self.pick(&["0", "3", "-1", "-2"]).into());
                        }
                    }
                    "CREATECONSUMER" | "DELCONSUMER" => a.push(self.consumer()),
                    _ => {}
                }
            }
            22 => {
                a.push(s("XINFO"));
                match self.rng.below(4) {
                    0 => a.extend([s("STREAM"), self.key()]),
                    1 => {
                        a.extend([s("STREAM"), self.key(), s("FULL")]);
                        if self.chance(50) {
                            a.push(s("COUNT"));
                            a.push(self.pick(&["0", "1", "3"]).into());
                        }
                    }
                    2 => a.extend([s("GROUPS"), self.key()]),
                    _ => a.extend([s("CONSUMERS"), self.key(), self.group()]),
                }
            }
            23 => {
                a.push(s("XLEN"));
                a.push(self.key());
            }
            24 => {
                if self.chance(15) {
                    a.push(s("DEL"));
                    a.push(self.key());
                } else {
                    a.push(s("XLEN"));
                    a.push(self.key());
                }
            }
            _ => {
                // A whole-stream picture now and then.
                a.extend([
                    s("XINFO"),
                    s("STREAM"),
                    self.key(),
                    s("FULL"),
                    s("COUNT"),
                    s("0"),
                ]);
            }
        }
        a
    }
}

/// A compact rendering for failure messages (bulks as text).
fn show(r: &Reply) -> String {
    let list = |v: &[Reply]| v.iter().map(show).collect::<Vec<_>>().join(", ");
    match r {
        Reply::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Reply::Array(v) => format!("[{}]", list(v)),
        Reply::Map(kv) => format!(
            "{{{}}}",
            kv.iter()
                .map(|(k, v)| format!("{}: {}", show(k), show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        r => format!("{r:?}"),
    }
}

fn run(seed: u64, ops: usize, resp3: bool, big: bool, t: u16, r: u16) {
    let mut a = Conn::with_proto(t, resp3);
    let mut b = Conn::with_proto(r, resp3);
    a.cmd(&["FLUSHALL"]);
    b.cmd(&["FLUSHALL"]);
    let mut g = Gen {
        rng: Rng(seed),
        ms: 1,
        big,
    };
    let mut history: Vec<String> = Vec::new();
    let (mut ok, mut errors) = (0usize, std::collections::BTreeMap::new());
    for i in 0..ops {
        let cmd = g.next();
        let args: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
        let (x, y) = (mask(&a.cmd(&args)), mask(&b.cmd(&args)));
        history.push(cmd.join(" "));
        if big && x == y {
            // Long streams: catch a silent divergence (a trim) at the command that made it.
            for k in ["s0", "s1", "s2"] {
                let (lx, ly) = (a.cmd(&["XLEN", k]), b.cmd(&["XLEN", k]));
                assert_eq!(
                    lx,
                    ly,
                    "seed {seed} op {i}: XLEN {k} after `{}`",
                    cmd.join(" ")
                );
            }
        }
        if let Reply::Error(e) = &y {
            *errors
                .entry(e.split(' ').next().unwrap_or("").to_string())
                .or_insert(0) += 1;
        } else {
            ok += 1;
        }
        if x != y {
            let from = history.len().saturating_sub(15);
            panic!(
                "seed {seed} op {i} (RESP{}): `{}`\n  tessera: {}\n  redis:   {}\nlast commands:\n{}",
                if resp3 { 3 } else { 2 },
                cmd.join(" "),
                show(&x),
                show(&y),
                history[from..].join("\n")
            );
        }
    }
    eprintln!("seed {seed}: {ok} replies equal, errors equal too: {errors:?}");
}

#[test]
fn random_stream_commands_match_redis() {
    let t = tessera();
    let r = redis();
    // STREAM_RANDOM_SEEDS=n explores more seeds (by hand); CI runs the first eight.
    let seeds = std::env::var("STREAM_RANDOM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8u64);
    for seed in 1..=seeds {
        run(seed, 2500, seed % 2 == 0, false, t.port, r.port);
    }
    for seed in 101..=100 + seeds.div_ceil(4) {
        run(seed, 6000, seed % 2 == 1, true, t.port, r.port);
    }
}
