//! LATENCY: the latency monitor's events and the per-command latency histograms
//! (crate::latency keeps both).

use super::{help_lines, table, CmdError, CmdResult, CommandSpec, Ctx};
use crate::latency::{self, Snapshot};

pub fn commands() -> Vec<CommandSpec> {
    let s = |name, arity, f, h| CommandSpec::new(name, arity, f, (0, 0, 0), h);
    let admin = "admin noscript loading stale";
    vec![CommandSpec::new("latency", -2, "", (0, 0, 0), help)
        .group("server")
        .since("2.8.13")
        .subs(vec![
            s("doctor", 2, admin, doctor),
            s("graph", 3, admin, graph),
            s("histogram", -2, admin, histogram),
            s("history", 3, admin, history),
            s("latest", 2, admin, latest),
            s("reset", -2, admin, reset),
            s("help", 2, "loading stale", help),
        ])]
}

fn help(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    help_lines(
        ctx,
        &[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Prints this help.",
        ],
    )
}

fn latest(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let rows = ctx.srv.latency.latest();
    ctx.out.array(rows.len());
    for (name, t, ms, max) in rows {
        ctx.out.array(4);
        ctx.out.bulk(name.as_bytes());
        ctx.out.int(t as i64);
        ctx.out.int(ms as i64);
        ctx.out.int(max as i64);
    }
    Ok(())
}

fn history(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let samples = ctx.srv.latency.history(&String::from_utf8_lossy(args[2]));
    ctx.out.array(samples.len());
    for (t, ms) in samples {
        ctx.out.array(2);
        ctx.out.int(t as i64);
        ctx.out.int(ms as i64);
    }
    Ok(())
}

fn reset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let names: Vec<String> = args[2..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    ctx.out.int(ctx.srv.latency.reset(&names) as i64);
    Ok(())
}

/// Graph width in columns, and rows of the sparkline itself (Redis's).
const GRAPH_COLS: usize = 80;
const GRAPH_ROWS: usize = 4;

fn graph(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let event = String::from_utf8_lossy(args[2]).into_owned();
    let Some(s) = ctx
        .srv
        .latency
        .summary(&event)
        .filter(|s| !s.samples.is_empty())
    else {
        return Err(CmdError::msg(format!(
            "ERR No samples available for event '{event}'"
        )));
    };
    let now = crate::server::now_ms() / 1000;
    let mut g = format!(
        "{event} - high {} ms, low {} ms (all time high {} ms)\n{}\n",
        s.samples.iter().map(|x| x.1).max().unwrap_or(0),
        s.min,
        s.max,
        "-".repeat(GRAPH_COLS)
    );
    let points: Vec<(u64, String)> = s
        .samples
        .iter()
        .map(|&(t, ms)| (ms, ago_label(now.saturating_sub(t))))
        .collect();
    let lo = s.min;
    let hi = points.iter().map(|p| p.0).max().unwrap_or(lo);
    for (i, chunk) in points.chunks(GRAPH_COLS).enumerate() {
        if i > 0 {
            g.push('\n');
        }
        sparkline(&mut g, chunk, lo, hi);
    }
    ctx.out.verbatim(g.as_bytes(), "txt");
    Ok(())
}

/// "12s", "3m", "2h", "1d": how long ago a sample was taken (the graph's labels).
fn ago_label(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Redis's filled sparkline: each sample is a column; its height in thirds of a row
/// (`_`, `o`, `#`, full rows `|`) over GRAPH_ROWS rows between the lowest and highest
/// sample, then a blank line and the labels written downwards.
fn sparkline(g: &mut String, points: &[(u64, String)], lo: u64, hi: u64) {
    const FILL: [char; 3] = ['_', 'o', '#'];
    let steps = FILL.len() * GRAPH_ROWS;
    let range = (hi - lo).max(1) as f64;
    let step_of = |v: u64| (((v - lo) as f64 * steps as f64 / range) as usize).min(steps - 1);
    for row in 0..GRAPH_ROWS {
        let line: String = points
            .iter()
            .map(|(v, _)| {
                let idx = step_of(*v) as isize - ((GRAPH_ROWS - row - 1) * FILL.len()) as isize;
                match idx {
                    i if i < 0 => ' ',
                    i if (i as usize) < FILL.len() => FILL[i as usize],
                    _ => '|',
                }
            })
            .collect();
        g.push_str(&line);
        g.push('\n');
    }
    g.push_str(&" ".repeat(points.len()));
    g.push('\n');
    let longest = points.iter().map(|p| p.1.len()).max().unwrap_or(0);
    for k in 0..longest {
        let line: String = points
            .iter()
            .map(|(_, l)| l.as_bytes().get(k).map_or(' ', |&c| c as char))
            .collect();
        g.push_str(&line);
        g.push('\n');
    }
}

fn doctor(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    let names = ctx.srv.latency.event_names();
    let mut r = String::new();
    if names.is_empty() && !latency::monitoring(ctx.srv) {
        r.push_str("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n");
    } else if names.is_empty() {
        r.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
    } else {
        r.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        let mut commands = false;
        for (i, name) in names.iter().enumerate() {
            let Some(s) = ctx.srv.latency.summary(name) else {
                continue;
            };
            commands |= name.ends_with("command");
            let n = s.samples.len();
            let period = if n > 1 {
                s.period as f64 / (n - 1) as f64
            } else {
                1.0
            };
            r.push_str(&format!(
                "{}. {name}: {n} latency spikes (average {:.0}ms, mean deviation {:.0}ms, period {period:.2} sec). Worst all time event {}ms.\n",
                i + 1,
                s.avg,
                s.mad,
                s.max
            ));
        }
        r.push_str("\nI have a few advices for you:\n\n");
        if commands {
            r.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
            r.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
        } else {
            r.push_str("- The events above come from the server's own work (expiry, eviction, persistence): check the size of the objects it deletes and the speed of the disk.\n");
        }
    }
    ctx.out.verbatim(r.as_bytes(), "txt");
    Ok(())
}

fn histogram(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let t = table();
    // (full name, snapshot) for every command (and subcommand) named, or all of them.
    let mut found: Vec<(&str, Snapshot)> = Vec::new();
    let add = |c: &'static CommandSpec, found: &mut Vec<(&'static str, Snapshot)>| {
        if let Some(s) = c.stats.seen().and_then(|st| st.hist.snapshot()) {
            found.push((c.full_name.as_str(), s));
        }
        for sub in &c.subcommands {
            if let Some(s) = sub.stats.seen().and_then(|st| st.hist.snapshot()) {
                found.push((sub.full_name.as_str(), s));
            }
        }
    };
    if args.len() == 2 {
        for c in &t.cmds {
            add(c, &mut found);
        }
    } else {
        for a in &args[2..] {
            // A name the server doesn't know is skipped, as in Redis; "config|get" names a
            // subcommand.
            let name = String::from_utf8_lossy(a).to_ascii_lowercase();
            let (top, sub) = match name.split_once('|') {
                Some((top, sub)) => (top.to_string(), Some(sub.to_string())),
                None => (name, None),
            };
            let Some(c) = t.get(top.as_bytes()) else {
                continue;
            };
            match sub {
                None => add(c, &mut found),
                Some(sub) => {
                    if let Some(sc) = c.subcommands.iter().find(|s| s.name == sub) {
                        if let Some(s) = sc.stats.seen().and_then(|st| st.hist.snapshot()) {
                            found.push((sc.full_name.as_str(), s));
                        }
                    }
                }
            }
        }
    }
    ctx.out.map(found.len());
    for (name, s) in found {
        ctx.out.bulk(name.as_bytes());
        ctx.out.map(2);
        ctx.out.bulk(b"calls");
        ctx.out.int(s.total() as i64);
        ctx.out.bulk(b"histogram_usec");
        let cdf = s.cdf();
        ctx.out.map(cdf.len());
        for (us, n) in cdf {
            ctx.out.int(us as i64);
            ctx.out.int(n as i64);
        }
    }
    Ok(())
}

/// INFO latencystats: each command's latency at the `latency-tracking-info-percentiles`.
pub fn info_section(percentiles: &[f64], s: &mut String) {
    s.push_str("# Latencystats\r\n");
    let ps: Vec<(String, f64)> = percentiles
        .iter()
        .map(|p| (crate::config::percentile_label(*p), *p))
        .collect();
    let mut line = |name: &str, snap: Snapshot| {
        let vals: Vec<String> = ps
            .iter()
            .map(|(label, p)| format!("p{label}={:.3}", snap.percentile(*p)))
            .collect();
        s.push_str(&format!(
            "latency_percentiles_usec_{name}:{}\r\n",
            vals.join(",")
        ));
    };
    for c in &table().cmds {
        if let Some(snap) = c.stats.seen().and_then(|st| st.hist.snapshot()) {
            line(&c.full_name, snap);
        }
        for sub in &c.subcommands {
            if let Some(snap) = sub.stats.seen().and_then(|st| st.hist.snapshot()) {
                line(&sub.full_name, snap);
            }
        }
    }
}
