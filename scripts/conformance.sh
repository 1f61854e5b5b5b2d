#!/usr/bin/env bash
# Runs Redis 7.0.15's own TCL test suites against tessera-node and, in the same run, against
# Debian's redis-server 7.0.15, and writes a side-by-side per-unit table plus the list of tests
# that pass on redis-server and fail on tessera-node (issue 18). See the README section
# "Conformance with Redis's own suites" for how to make REDIS_SRC.
#
# Usage: make conformance REDIS_SRC=<dir> [knobs below]   (or: REDIS_SRC=<dir> bash scripts/conformance.sh)
#   REDIS_SRC        a tree holding Redis 7.0.15's runtest, runtest-cluster, tests/ and utils/ (required)
#   MODES            comma list of a,b,c (default a,b,c):
#                      a = ./runtest normal mode, the harness spawns src/redis-server itself;
#                      b = ./runtest --host/--port external mode, one fresh server per unit;
#                      c = ./runtest-cluster (tests/cluster), the harness spawns 20 instances.
#   SERVERS          comma list of redis,tessera (default redis,tessera)
#   UNITS            units for modes a and b, e.g. "unit/type/list unit/keyspace" (default: all)
#   NORMAL_UNITS     units for mode a only (default: UNITS)
#   EXTERNAL_UNITS   units for mode b only (default: UNITS)
#   CLUSTER_UNITS    units for mode c, e.g. "00-base 15-cluster-slots" (default: all)
#   TAGS             passed as ./runtest --tags (e.g. "-slow"); default none
#   CLIENTS          ./runtest --clients (default 1: the machine has 2 cores)
#   HARNESS_TIMEOUT  ./runtest --timeout: seconds without progress before [TIMEOUT] (default 600)
#   UNIT_TIMEOUT     outer wall-clock limit per unit and server, in seconds (default 1800), so a
#                    hung unit cannot hang the run
#   PARALLEL_SERVERS=1  in modes a and b, run a unit on both servers at once (each in its own
#                    tree, port range and fresh servers): about half the wall time on this
#                    2-core machine, both servers under the same load. Mode c stays one at a
#                    time (runtest-cluster's instances use fixed ports).
#   DURABLE=1        pass --durable (exceptions become failures and the unit goes on)
#   TESSERA_BIN      the tessera-node binary (default <target>/release/tessera-node, built with
#                    `cargo build --release -p tessera-node` when missing or older than node/)
#   OUT              the report (default bench/conformance-<UTC date>.md)
#   REPORT_FROM      a run directory: only redo its report from its logs (nothing is run)
#   NOTE             a paragraph put at the top of the report (e.g. "Partial trial: ...")
#   LIST=1           only print the units each mode would run
#   EXEMPT_FILE      the exemptions (default scripts/conformance-exempt.txt, the README's list):
#                    `unit <unit>` lines are not run on tessera-node (modes a, b), `test <name>`
#                    lines are passed to its runs as --skiptest; both are listed apart in the
#                    report and not counted against tessera-node. EXEMPT_FILE=/dev/null: none.
# Raw logs and the two per-run copies of REDIS_SRC live under target/conformance/<date>/run-<time>/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "conformance: $*" >&2; exit 2; }

py=$(command -v python3 || true)
[ -n "$py" ] || die "python3 is needed to parse the harness output"

# report RUN_DIR OUT: parse a run's logs (manifest.tsv, meta.sh) into the markdown report, print
# it and exit 0, or 3 when tessera-node is behind redis-server in that run.
report() {
  local run_dir=$1 out=$2 status=0
  mkdir -p "$(dirname "$out")"
  (
    set -a
    # shellcheck source=/dev/null
    . "$run_dir/meta.sh"
    [ -n "${NOTE:-}" ] && export CONF_NOTE=$NOTE
    set +a
    CONF_OUT=$out "$py" - <<'PY'
import collections, os, re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MODE_TITLE = {
    "a": "Mode (a): `./runtest`, normal mode (the harness spawns src/redis-server)",
    "b": "Mode (b): `./runtest --host --port`, external mode, one fresh server per unit",
    "c": "Mode (c): `./runtest-cluster` (tests/cluster)",
}


def new_result():
    return {"passed": [], "failed": [], "reasons": {}, "timedout": [], "skipped": [],
            "stop": None, "done": False, "killed": 0, "last": None, "nostart": 0}


def ok(r, name):
    r["passed"].append(name)
    r["last"] = name


def fail(r, name, reason):
    r["failed"].append(name)
    r["last"] = name
    reason = re.sub(r"\S*/trees/(?:redis|tessera)/", "", reason)  # paths inside the run's tree
    r["reasons"].setdefault(name, reason.strip()[:200])


def parse_runtest(lines):
    """[ok]/[err]/[skip]/[ignore]/[exception]/[TIMEOUT] lines of tests/test_helper.tcl."""
    r = new_result()
    for i, l in enumerate(lines):
        if l.startswith("[ok]: "):
            ok(r, re.sub(r" \(\d+ ms\)$", "", l[6:]))
        elif l.startswith("[err]: "):
            name = re.sub(r" in tests/\S+\.tcl$", "", l[7:])
            detail = lines[i + 1:i + 80]
            reason = next((d for d in detail if d.startswith("ERROR:")), detail[0] if detail else "")
            fail(r, name, reason)
            if name == "Can't start the Redis server":
                r["nostart"] += 1
        elif l.startswith("[skip]: "):
            r["skipped"].append(l[8:])
        elif l.startswith("[ignore]: "):
            r["skipped"].append(l[10:])
        elif l.startswith("[exception]: "):
            tail = "\n".join(lines[i:i + 400])
            m = re.search(r'\n"test [{"]([^}"\n]*)[}"]', tail)
            name = m.group(1) if m else "(outside a test)"
            fail(r, name, "exception: " + l[13:])
            r["stop"] = "exception in: " + name
        elif l.startswith("[TIMEOUT]"):
            name = "(unknown test)"
            for nxt in lines[i + 1:i + 40]:
                m = re.search(r"=> \((?:IN PROGRESS|OK|ERR)\) (.*)$", nxt)
                if m:
                    name = m.group(1)
                    break
            r["timedout"].append(name)
            r["stop"] = "harness TIMEOUT in: " + name
        elif re.match(r"^\[\d+/\d+ done\]: ", l):
            r["done"] = True
        elif l.startswith("Killing still running Redis server"):
            r["killed"] += 1
    return r


def parse_cluster(lines):
    """`HH:MM:SS> name: OK` / `FAILED: ...` lines of tests/instances.tcl."""
    r = new_result()
    pending = None
    for l in lines:
        m = re.match(r"^\d\d:\d\d:\d\d> (.*)$", l)
        if m:
            rest = m.group(1)
            pending = None
            # A test may print progress (dots, W) between its name and the verdict.
            m_ok = re.match(r"^(.*): \S*OK$", rest)
            m_fail = re.match(r"^(.*?): \S*FAILED: (.*)$", rest)
            if m_ok:
                ok(r, m_ok.group(1))
            elif m_fail:
                fail(r, m_fail.group(1), m_fail.group(2))
                if m_fail.group(2).startswith("caught an error in the test"):
                    r["stop"] = "exception in: " + m_fail.group(1)
            else:
                pending = rest[:-2] if rest.endswith(": ") else rest
            continue
        if l.startswith("FAILED: caught an error in the test"):
            name = pending or "(outside a test)"
            fail(r, name, "exception: " + l[len("FAILED: "):])
            r["stop"] = "exception in: " + name
            pending = None
        elif pending is not None and l.rstrip().endswith("OK"):
            ok(r, pending)
            pending = None
        elif pending is not None and l.startswith("FAILED: "):
            fail(r, pending, l[8:])
            pending = None
        elif l.startswith("(Jumping to next unit after error)"):
            r["stop"] = r["stop"] or "stopped at its first failure"
        elif l.startswith("GOOD! No errors."):
            r["done"] = True
        elif re.match(r"^WARNING \d+ test\(s\) failed\.", l):
            r["done"] = True
            # The harness also counts failures outside any test: an instance's crash report
            # and anything an instance wrote to stderr (its valgrind/sanitizer check of
            # err.txt). Those are failures too, named apart.
            counted = int(re.match(r"^WARNING (\d+)", l).group(1))
            for k in range(counted - len(r["failed"])):
                fail(r, f"(outside a test: instance crash report or stderr output #{k + 1})",
                     "counted by the harness's end-of-unit checks")
    r["pending"] = pending
    return r


rows = []
with open(os.environ["CONF_MANIFEST"]) as f:
    for line in f:
        mode, server, unit, log, rc, secs, note = line.rstrip("\n").split("\t")
        try:
            with open(log, errors="replace") as lf:
                lines = [ANSI.sub("", x.rstrip("\r")) for x in lf.read().splitlines()]
        except OSError:
            lines = []
        r = parse_cluster(lines) if mode == "c" else parse_runtest(lines)
        rc = int(rc)
        if rc in (124, 137):
            # The harness does not print a test's start, so name the running one when known
            # (cluster mode) or the last one that finished.
            if r.get("pending"):
                name, where = r["pending"], "in: " + r["pending"]
            else:
                last = r["last"]
                name = "(test after: " + last + ")" if last else "(first test)"
                where = "after: " + last if last else "before the first test ended"
            r["timedout"].append(name)
            r["stop"] = f"killed by the outer timeout ({secs} s) {where}"
        elif note and rc == 98:
            r["stop"] = note
        elif r["stop"] is None and not r["done"]:
            r["stop"] = f"no end line (exit {rc})" + (f"; {note}" if note else "")
        elif note:
            r["stop"] = (r["stop"] + "; " if r["stop"] else "") + note
        r.update(mode=mode, server=server, unit=unit, log=log, rc=rc, secs=int(secs))
        rows.append(r)

servers = [s for s in os.environ["CONF_SERVERS"].split(",") if s]
# The README's exemptions in force for this run: {"unit": {name: reason}, "test": {...}}.
exempt = {"unit": {}, "test": {}}
try:
    with open(os.environ.get("CONF_EXEMPT", "")) as ef:
        for ln in ef:
            ln = ln.rstrip("\n")
            if not ln or ln.startswith("#") or " " not in ln:
                continue
            what, rest = ln.split(" ", 1)
            name, _, reason = rest.partition("\t")
            if what in exempt:
                exempt[what][name] = reason
except OSError:
    pass
label = {"redis": "redis-server", "tessera": "tessera-node"}
by = {(r["mode"], r["unit"], r["server"]): r for r in rows}
order = []
for r in rows:
    if (r["mode"], r["unit"]) not in order:
        order.append((r["mode"], r["unit"]))


def esc(s):
    return s.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def cell(r):
    if r is None:
        return ["-"] * 5
    status = "completed" if r["stop"] is None else "**" + esc(r["stop"]) + "**"
    if r["nostart"]:
        status += f"; **the harness could not start the server {r['nostart']}x**"
    return [str(len(r["passed"])), str(len(r["failed"])), str(len(r["timedout"])),
            str(len(r["skipped"])), status]


out = []
out.append(f"# Conformance with Redis 7.0.15's own suites, {os.environ['CONF_DAY']}")
out.append("")
if os.environ.get("CONF_NOTE"):
    out += [os.environ["CONF_NOTE"], ""]
out.append(f"- command: `{os.environ['CONF_CMDLINE']}`")
out.append(f"- redis-server: `{os.environ['CONF_REDIS_VERSION']}` (Debian's, from PATH)")
if os.environ.get("CONF_TESSERA_VERSION"):
    out.append(f"- tessera-node: `{os.environ['CONF_TESSERA_VERSION']}` ({os.environ['CONF_GIT']})")
out.append(f"- machine: {os.environ['CONF_NPROC']} cores; raw logs: `{os.environ['CONF_RUN_DIR']}/`")
out.append("- columns per server: tests passed / failed / timed out / skipped (skip and tag-ignored) / "
           "how the unit ended (`completed`, or why it stopped early)")
for mode in ("a", "b", "c"):
    units = [u for (m, u) in order if m == mode]
    if not units:
        continue
    out += ["", "## " + MODE_TITLE[mode], ""]
    head = ["unit"]
    for s in servers:
        n = label[s]
        head += [f"{n} pass", "fail", "t/o", "skip", "end"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    totals = {s: [0, 0, 0, 0, 0] for s in servers}
    for u in units:
        line = [u]
        for s in servers:
            r = by.get((mode, u, s))
            line += cell(r)
            if r:
                t = totals[s]
                t[0] += len(r["passed"]); t[1] += len(r["failed"]); t[2] += len(r["timedout"])
                t[3] += len(r["skipped"]); t[4] += r["stop"] is not None
        out.append("| " + " | ".join(line) + " |")
    line = ["**total**"]
    for s in servers:
        t = totals[s]
        line += [str(t[0]), str(t[1]), str(t[2]), str(t[3]), f"{t[4]} of {len(units)} stopped early"]
    out.append("| " + " | ".join(line) + " |")

any_diff = False
randomized = []
if "redis" in servers and "tessera" in servers:
    out += ["", "## Tests that pass on redis-server and not on tessera-node", ""]
    for mode in ("a", "b", "c"):
        for (m, u) in order:
            if m != mode:
                continue
            rr, tr = by.get((m, u, "redis")), by.get((m, u, "tessera"))
            if rr is None or tr is None:
                continue
            missing = collections.Counter(rr["passed"]) - collections.Counter(tr["passed"])
            for name in list(missing):
                if name in exempt["test"]:
                    del missing[name]
            # Failures the harness counted outside any test (see parse_cluster) that
            # redis-server's run did not have.
            outside = [n for n in tr["failed"]
                       if n.startswith("(outside a test") and n not in rr["failed"]]
            if not missing and not outside:
                continue
            # A unit that ran to its end on tessera-node with no failure and no timeout, yet
            # lacks some of redis-server's test names: those names carry random values
            # (psync2's "x = 25894", the failover loop's node numbers), so the two runs
            # named different tests. Listed apart, not as differences.
            if tr["stop"] is None and not tr["failed"] and not tr["timedout"] and not any(
                    any(s == n or s.startswith(n + ": ") for s in tr["skipped"]) for n in missing):
                randomized.append(f"- ({m}) {esc(u)}: {sum(missing.values())} of redis-server's "
                                  f"test names not in tessera-node's run ({len(tr['passed'])} passed there, "
                                  f"{len(rr['passed'])} on redis-server)")
                continue
            any_diff = True
            out.append(f"### ({m}) {u}: {sum(missing.values()) + len(outside)}")
            out.append("")
            for name in rr["passed"]:
                if missing.get(name, 0) <= 0:
                    continue
                missing[name] -= 1
                if name in tr["failed"]:
                    why = "failed: " + tr["reasons"].get(name, "")
                elif any(t == name or t.startswith(name + ": ") for t in tr["timedout"]):
                    why = "timed out"
                elif any(s == name or s.startswith(name + ": ") for s in tr["skipped"]):
                    why = "skipped"
                elif tr["stop"] is None:
                    why = "not run (the unit ended normally without it)"
                else:
                    why = "not reached"
                out.append(f"- {esc(name)} — {esc(why)}")
            for name in outside:
                out.append(f"- {esc(name)} — failed: {esc(tr['reasons'].get(name, ''))}")
            out.append("")
    if not any_diff:
        out.append("None.")
    if randomized:
        out += ["", "## Units whose test names are random (ran to the end, no failure on tessera-node)", ""]
        out += randomized
if exempt["unit"] or exempt["test"]:
    out += ["", "## Exempted (README: Exemptions): not run or skipped on tessera-node", ""]
    for kind, title in (("unit", "unit"), ("test", "test")):
        for name, reason in exempt[kind].items():
            out.append(f"- {title} {esc(name)} — {esc(reason)}")

text = "\n".join(out).rstrip() + "\n"
with open(os.environ["CONF_OUT"], "w") as f:
    f.write(text)
print(text)
# Exit 3 when tessera-node misses a test redis-server passes, or a tessera-node unit stops early.
behind = "tessera" in servers and (
    ("redis" in servers and any_diff) or any(r["stop"] for r in rows if r["server"] == "tessera"))
raise SystemExit(3 if behind else 0)
PY
  ) || status=$?
  echo "conformance: report written to ${out#"$root"/}; raw logs in ${run_dir#"$root"/}/"
  case $status in
    0) ;;
    3) echo "conformance: tessera-node is behind redis-server in this run (exit 3)" >&2 ;;
    *) die "parsing the logs failed (exit $status)" ;;
  esac
  exit "$status"
}

# REPORT_FROM=<run dir>: only redo the report of an earlier run, from its logs.
if [ -n "${REPORT_FROM:-}" ]; then
  [ -f "$REPORT_FROM/meta.sh" ] || die "REPORT_FROM=$REPORT_FROM has no meta.sh (not a finished run directory)"
  from=$(cd "$REPORT_FROM" && pwd)
  # shellcheck source=/dev/null
  day=$(. "$from/meta.sh" && echo "$CONF_DAY")
  report "$from" "${OUT:-$root/bench/conformance-$day.md}"
fi


# ---------------------------------------------------------------- inputs
[ -n "${REDIS_SRC:-}" ] || die "REDIS_SRC is not set. Make one from a redis/redis clone:
  mkdir -p ~/redis-7.0.15 && git -C <clone> archive 7.0.15 tests runtest runtest-cluster utils | tar -x -C ~/redis-7.0.15
then: make conformance REDIS_SRC=~/redis-7.0.15"
[ -d "$REDIS_SRC" ] || die "REDIS_SRC=$REDIS_SRC is not a directory"
REDIS_SRC=$(cd "$REDIS_SRC" && pwd)
if [ ! -f "$REDIS_SRC/runtest" ] || [ ! -f "$REDIS_SRC/tests/test_helper.tcl" ]; then
  die "REDIS_SRC=$REDIS_SRC lacks runtest or tests/test_helper.tcl (expected Redis 7.0.15's tests, runtest, runtest-cluster, utils)"
fi

modes=${MODES:-a,b,c}
servers=${SERVERS:-redis,tessera}
for m in ${modes//,/ }; do
  case $m in a|b|c) ;; *) die "MODES: unknown mode '$m' (use a, b, c)";; esac
done
for s in ${servers//,/ }; do
  case $s in redis|tessera) ;; *) die "SERVERS: unknown server '$s' (use redis, tessera)";; esac
done
has_mode() { [[ ",$modes," == *",$1,"* ]]; }
has_server() { [[ ",$servers," == *",$1,"* ]]; }
if has_mode c; then
  if [ ! -f "$REDIS_SRC/runtest-cluster" ] || [ ! -d "$REDIS_SRC/tests/cluster/tests" ]; then
    die "REDIS_SRC=$REDIS_SRC lacks runtest-cluster or tests/cluster (needed by mode c)"
  fi
fi

tclsh=""
for v in 8.5 8.6 8.7; do
  t=$(command -v "tclsh$v" || true)
  [ -n "$t" ] && tclsh=$t
done
[ -n "$tclsh" ] || die "no tclsh8.5/8.6/8.7 on PATH: Redis's test harness needs Tcl (bash scripts/install-deps.sh installs Debian's tcl8.6)"
command -v timeout >/dev/null || die "coreutils timeout is needed"

clients=${CLIENTS:-1}
harness_timeout=${HARNESS_TIMEOUT:-600}
unit_timeout=${UNIT_TIMEOUT:-1800}
tags=${TAGS:-}
for n in "$clients" "$harness_timeout" "$unit_timeout"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "CLIENTS, HARNESS_TIMEOUT and UNIT_TIMEOUT must be positive integers"
done

# ---------------------------------------------------------------- units
# The suite lists its own units (--list-tests only parses, it runs nothing).
all_units() { (cd "$REDIS_SRC" && "$tclsh" tests/test_helper.tcl --list-tests); }
all_cluster_units() {
  local f
  for f in "$REDIS_SRC"/tests/cluster/tests/*.tcl; do basename "$f" .tcl; done
}
normal_units=${NORMAL_UNITS:-${UNITS:-}}
external_units=${EXTERNAL_UNITS:-${UNITS:-}}
cluster_units=${CLUSTER_UNITS:-}
has_mode a && [ -z "$normal_units" ] && normal_units=$(all_units)
has_mode b && [ -z "$external_units" ] && external_units=$(all_units)
has_mode c && [ -z "$cluster_units" ] && cluster_units=$(all_cluster_units)
if { has_mode a && [ -z "$normal_units" ]; } || { has_mode b && [ -z "$external_units" ]; } \
  || { has_mode c && [ -z "$cluster_units" ]; }; then
  die "no units to run (could not list the suite's units from REDIS_SRC)"
fi
if [ "${LIST:-0}" = 1 ]; then
  has_mode a && echo "mode a: ${normal_units//$'\n'/ }"
  has_mode b && echo "mode b: ${external_units//$'\n'/ }"
  has_mode c && echo "mode c: ${cluster_units//$'\n'/ }"
  exit 0
fi

# ---------------------------------------------------------------- binaries
# Debian's binaries, from PATH: the reference server and every helper tool for both trees.
declare -A deb
for b in redis-server redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
  p=$(command -v "$b" || true)
  [ -n "$p" ] || die "$b not found on PATH (bash scripts/install-deps.sh installs Debian's redis-server and redis-tools)"
  deb[$b]=$p
done
# Debian ships redis-sentinel in its own package; in Redis's build it is the server binary under
# another name, which is what we link when the package is absent (no unit we run uses it).
deb[redis-sentinel]=$(command -v redis-sentinel || echo "${deb[redis-server]}")
redis_version=$("${deb[redis-server]}" --version)
[[ $redis_version == *"v=7.0."* ]] || echo "conformance: warning: PATH's redis-server is not 7.0.x: $redis_version" >&2

tessera_bin=""
if has_server tessera; then
  tessera_bin=${TESSERA_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/tessera-node}
  if [ -z "${TESSERA_BIN:-}" ]; then
    stale=""
    if [ -x "$tessera_bin" ]; then
      stale=$(find "$root/node" "$root/Cargo.toml" "$root/Cargo.lock" -newer "$tessera_bin" \
        \( -name '*.rs' -o -name 'Cargo.toml' -o -name 'Cargo.lock' \) -not -path '*/target/*' -print -quit 2>/dev/null || true)
    fi
    if [ ! -x "$tessera_bin" ] || [ -n "$stale" ]; then
      echo "conformance: building tessera-node (release): ${stale:+$stale is newer than the binary}${stale:-no release binary yet}"
      (cd "$root" && ${CARGO:-cargo} build --release -p tessera-node)
    else
      echo "conformance: using the existing release build $tessera_bin"
    fi
  fi
  [ -x "$tessera_bin" ] || die "tessera-node binary $tessera_bin is missing"
  tessera_bin=$(cd "$(dirname "$tessera_bin")" && pwd)/$(basename "$tessera_bin")
fi
# The tree the binary was taken from, read now: commits made while the suites run are not in
# the binary under test.
git_rev="release build; tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$root" diff --quiet HEAD -- node 2>/dev/null || git_rev+=" (node/ had uncommitted changes)"
[ -n "${TESSERA_BIN:-}" ] && git_rev="TESSERA_BIN=$TESSERA_BIN"

# ---------------------------------------------------------------- work area
day=$(date -u +%F)
run_dir="$root/target/conformance/$day/run-$(date -u +%H%M%S)"
out=${OUT:-$root/bench/conformance-$day.md}
mkdir -p "$run_dir"
manifest="$run_dir/manifest.tsv"
: > "$manifest"

# One copy of REDIS_SRC per server under test, with src/ linked to the binaries under test.
make_tree() {
  local server=$1 tree="$run_dir/trees/$1"
  rm -rf "$tree"
  mkdir -p "$tree"
  # Only the suite: REDIS_SRC may also be a whole clone, whose src/ and .git we do not want.
  local e
  for e in runtest runtest-cluster tests utils; do
    [ -e "$REDIS_SRC/$e" ] && cp -a "$REDIS_SRC/$e" "$tree/"
  done
  mkdir -p "$tree/src" "$tree/tests/tmp"
  [ -d "$tree/tests/cluster" ] && mkdir -p "$tree/tests/cluster/tmp"
  local b
  for b in redis-cli redis-benchmark redis-check-aof redis-check-rdb redis-sentinel; do
    ln -s "${deb[$b]}" "$tree/src/$b"
  done
  if [ "$server" = tessera ]; then
    ln -s "$tessera_bin" "$tree/src/redis-server"
  else
    ln -s "${deb[redis-server]}" "$tree/src/redis-server"
  fi
  echo "$tree"
}

declare -A tree
for s in ${servers//,/ }; do tree[$s]=$(make_tree "$s"); done

runtest_args=(--clients "$clients" --timeout "$harness_timeout")
[ -n "$tags" ] && runtest_args+=(--tags "$tags")
[ "${DURABLE:-0}" = 1 ] && runtest_args+=(--durable)

# Exemptions (README "Exemptions"): whole units not run on tessera-node, single tests skipped
# there by the harness itself (so a test that leaves a config behind when it fails cannot
# fail the ones after it).
exempt_file=${EXEMPT_FILE:-$root/scripts/conformance-exempt.txt}
[ -r "$exempt_file" ] || die "EXEMPT_FILE=$exempt_file is not readable"
declare -A exempt_unit=()
tessera_skips=()
while IFS=$'\t' read -r what reason; do
  case $what in
    '#'*|'') ;;
    'unit '*) exempt_unit[${what#unit }]=$reason ;;
    'test '*) tessera_skips+=(--skiptest "${what#test }") ;;
    *) die "$exempt_file: a line must start with 'unit ' or 'test ': $what" ;;
  esac
done <"$exempt_file"

export TERM=dumb   # the harness colours its output only on xterm-like terminals

# The external server we started, killed on exit whatever happens.
ext_pid=""
stop_ext() {
  [ -n "$ext_pid" ] || return 0
  kill "$ext_pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$ext_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$ext_pid" 2>/dev/null || true
  wait "$ext_pid" 2>/dev/null || true
  ext_pid=""
}
trap stop_ext EXIT

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  # Each server its own range, so two units started at once never pick the same port.
  local p base=17000
  [ "${1:-}" = tessera ] && base=18000
  for _ in $(seq 1 200); do
    p=$((base + RANDOM % 1000))
    if ! port_busy "$p" && ! port_busy $((p + 10000)); then echo "$p"; return 0; fi
  done
  return 1
}

# run_unit MODE SERVER UNIT: one harness run of one unit, its log and exit code in the manifest.
run_unit() {
  local mode=$1 server=$2 unit=$3 t=${tree[$2]}
  local log="$run_dir/$mode/$server/${unit//\//_}.log"
  mkdir -p "$(dirname "$log")"
  local rc=0 note="" started=$SECONDS
  local extra=()
  if [ "$server" = tessera ] && [ "$mode" != c ]; then
    if [ -n "${exempt_unit[$unit]+x}" ]; then
      echo "conformance: mode $mode, $server, $unit: exempt (${exempt_unit[$unit]})"
      return 0
    fi
    extra=("${tessera_skips[@]}")
  fi
  # Disjoint port ranges for the harness's own servers (runtest's default is 21111 + 8000),
  # so the two servers' runs can share the machine.
  if [ "$mode" != c ]; then
    if [ "$server" = tessera ]; then extra+=(--baseport 25111 --portcount 4000)
    else extra+=(--baseport 21111 --portcount 4000); fi
  fi
  echo "conformance: mode $mode, $server, $unit"
  case $mode in
    a)
      (cd "$t" && timeout -k 10 "$unit_timeout" ./runtest --single "$unit" "${runtest_args[@]}" "${extra[@]}") >"$log" 2>&1 || rc=$?
      ;;
    b)
      local port dir
      port=$(free_port "$server") || { note="no free port"; rc=99; }
      if [ "$rc" = 0 ]; then
        dir="$run_dir/$mode/$server/${unit//\//_}.server"
        mkdir -p "$dir"
        "$t/src/redis-server" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
          --daemonize no --logfile "$dir/server.log" --enable-protected-configs yes \
          --enable-debug-command yes --enable-module-command yes >"$dir/stdout" 2>&1 &
        ext_pid=$!
        local up=0
        for _ in $(seq 1 100); do
          if "${deb[redis-cli]}" -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then up=1; break; fi
          kill -0 "$ext_pid" 2>/dev/null || break
          sleep 0.1
        done
        if [ "$up" = 1 ]; then
          (cd "$t" && timeout -k 10 "$unit_timeout" ./runtest --host 127.0.0.1 --port "$port" --single "$unit" "${runtest_args[@]}" "${extra[@]}") >"$log" 2>&1 || rc=$?
          kill -0 "$ext_pid" 2>/dev/null || note="server exited during the unit"
        else
          note="server exited or did not answer PING within 10 s"
          rc=98
          { echo "--- server stdout/stderr:"; cat "$dir/stdout"; echo "--- server log:"; cat "$dir/server.log" 2>/dev/null || true; } >"$log"
        fi
        stop_ext
      fi
      ;;
    c)
      (cd "$t" && timeout -k 10 "$unit_timeout" ./runtest-cluster --single "$unit") >"$log" 2>&1 || rc=$?
      ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$server" "$unit" "$log" "$rc" "$((SECONDS - started))" "$note" >>"$manifest"
}

# run_servers MODE UNIT: the unit on each server, one after the other or (PARALLEL_SERVERS=1)
# at once.
run_servers() {
  local s
  if [ "${PARALLEL_SERVERS:-0}" = 1 ]; then
    for s in ${servers//,/ }; do run_unit "$1" "$s" "$2" & done
    wait
  else
    for s in ${servers//,/ }; do run_unit "$1" "$s" "$2"; done
  fi
}
has_mode a && for u in $normal_units; do run_servers a "$u"; done
has_mode b && for u in $external_units; do run_servers b "$u"; done
has_mode c && for u in $cluster_units; do for s in ${servers//,/ }; do run_unit c "$s" "$u"; done; done

# ---------------------------------------------------------------- report
cmdline="make conformance REDIS_SRC=<tree of redis 7.0.15> MODES=$modes SERVERS=$servers"
[ -n "${UNITS:-}" ] && cmdline+=" UNITS=\"$UNITS\""
[ -n "${NORMAL_UNITS:-}" ] && cmdline+=" NORMAL_UNITS=\"$NORMAL_UNITS\""
[ -n "${EXTERNAL_UNITS:-}" ] && cmdline+=" EXTERNAL_UNITS=\"$EXTERNAL_UNITS\""
[ -n "${CLUSTER_UNITS:-}" ] && cmdline+=" CLUSTER_UNITS=\"$CLUSTER_UNITS\""
[ -n "$tags" ] && cmdline+=" TAGS=\"$tags\""
cmdline+=" CLIENTS=$clients HARNESS_TIMEOUT=$harness_timeout UNIT_TIMEOUT=$unit_timeout"
[ "${DURABLE:-0}" = 1 ] && cmdline+=" DURABLE=1"
[ "${PARALLEL_SERVERS:-0}" = 1 ] && cmdline+=" PARALLEL_SERVERS=1"

tessera_version=""
[ -n "$tessera_bin" ] && tessera_version=$("$tessera_bin" --version 2>/dev/null | head -1 || true)
cp "$exempt_file" "$run_dir/exempt.txt"

# Everything the report needs, so REPORT_FROM=<run dir> can redo it from the logs alone.
{
  printf 'CONF_MANIFEST=%q\n' "$manifest"
  printf 'CONF_CMDLINE=%q\n' "$cmdline"
  printf 'CONF_DAY=%q\n' "$day"
  printf 'CONF_REDIS_VERSION=%q\n' "$redis_version"
  printf 'CONF_TESSERA_VERSION=%q\n' "$tessera_version"
  printf 'CONF_GIT=%q\n' "$git_rev"
  printf 'CONF_RUN_DIR=%q\n' "${run_dir#"$root"/}"
  printf 'CONF_SERVERS=%q\n' "$servers"
  printf 'CONF_NPROC=%q\n' "$(nproc)"
  printf 'CONF_NOTE=%q\n' "${NOTE:-}"
  printf 'CONF_EXEMPT=%q\n' "$run_dir/exempt.txt"
} >"$run_dir/meta.sh"
report "$run_dir" "$out"
