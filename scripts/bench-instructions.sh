#!/usr/bin/env bash
# User-space instructions per request: tessera-node vs redis-server 7.0 vs valkey-server 9.1,
# counted by valgrind's callgrind. Timing on this kind of VM moves ±10% from run to run; an
# instruction count does not, so it shows what a change to the node's own code did, where a
# CPU-time A/B would need dozens of runs. It leaves out the kernel (for these tests the
# three servers make the same syscalls: one read and one write per pipelined batch) and
# cache misses, so it complements bench-node's CPU per request; it does not replace it.
#
# Each server runs each test twice under callgrind, with BENCH_N_A and BENCH_N_B requests from
# `tessera-load pipe` (redis-benchmark's commands and keys, 50 connections, -P
# BENCH_PIPELINE); the difference of the two totals over N_B - N_A leaves start-up, shutdown
# and the fills of GET and LPOP (the same SETs and LPUSHes in both runs) out. tessera-node
# runs with busy polling off: a spinning thread's instructions are not the requests'.
#
# Needs valgrind (make deps), target/release/tessera-node and tessera-load (make release).
# Env: BENCH_TESTS (default the nine of bench-node's capacity table), BENCH_PIPELINE (16),
# BENCH_N_A (100000), BENCH_N_B (300000), BENCH_OUT (the report's path), TESSERA_BIN,
# TESSERA_LOAD.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=bench-instr
# shellcheck source=scripts/bench-servers.sh
. "$ROOT/scripts/bench-servers.sh"

TESSERA_BIN=${TESSERA_BIN:-$ROOT/target/release/tessera-node}
LOAD_BIN=${TESSERA_LOAD:-$ROOT/target/release/tessera-load}
for b in "$TESSERA_BIN" "$LOAD_BIN"; do
    [ -x "$b" ] || { echo "missing $b (run make release)" >&2; exit 1; }
done
for c in valgrind callgrind_annotate redis-server valkey-server redis-cli; do
    command -v "$c" >/dev/null || { echo "$c missing (make deps)" >&2; exit 1; }
done
TESTS=${BENCH_TESTS:-set,get,incr,lpush,lpop,sadd,hset,zadd,mset}
P=${BENCH_PIPELINE:-16}
N_A=${BENCH_N_A:-100000}
N_B=${BENCH_N_B:-300000}
[ "$N_B" -gt "$N_A" ] || { echo "BENCH_N_B must be more than BENCH_N_A" >&2; exit 1; }
OUT=${BENCH_OUT:-$ROOT/bench/instructions-$(date +%F).md}

load() { # port test requests
    local res
    res=$("$LOAD_BIN" pipe --addr "127.0.0.1:$1" --test "$2" --conns 50 --pipeline "$P" \
        --requests "$3" 2>&1) || { echo "tessera-load pipe ($2) failed: $res" >&2; return 1; }
    [[ $res =~ errors=0\  ]] || { echo "errors answering $2: $res" >&2; return 1; }
}

# Runs in this shell (not a command substitution), so that `cleanup` knows its server.
run_total() { # name test requests binary [args...] -> TOTAL, the server's instructions
    local name=$1 t=$2 n=$3 port pid out; shift 3
    port=$(free_port 12950)
    out="$TMP/$name.cg"
    rm -f "$out"
    (cd "$TMP" && exec valgrind --tool=callgrind --callgrind-out-file="$out" "$@" \
        --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$TMP/$name.log" 2>&1) &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 600); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -p "$port" ping >/dev/null 2>&1 \
        || { echo "$name did not start under valgrind" >&2; cat "$TMP/$name.log" >&2; exit 1; }
    # GET reads the key SET wrote and LPOP pops what LPUSH pushed, as in bench-node, where
    # the tests run in that order on one server. The fill is the same in both runs, so it
    # cancels out.
    case $t in
        get) load "$port" set 1000 || exit 1 ;;
        lpop) load "$port" lpush "$N_B" || exit 1 ;;
    esac
    load "$port" "$t" "$n" || exit 1
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" || true
    [ -s "$out" ] || { echo "no callgrind output from $name" >&2; cat "$TMP/$name.log" >&2; exit 1; }
    # awk reads to the end: an early exit would fail the pipeline on SIGPIPE (pipefail).
    TOTAL=$(callgrind_annotate "$out" 2>/dev/null \
        | awk '/PROGRAM TOTALS/ && t == "" { gsub(",", "", $1); t = $1 } END { print t }')
    [ -n "$TOTAL" ] || { echo "no instruction total in $name's callgrind output" >&2; exit 1; }
}

per_request() { # name test binary [args...] -> IR[name,test], instructions per request
    local name=$1 t=$2 a; shift 2
    run_total "$name" "$t" "$N_A" "$@"
    a=$TOTAL
    run_total "$name" "$t" "$N_B" "$@"
    IR[$name,$t]=$(( (TOTAL - a) / (N_B - N_A) ))
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

declare -A IR
for t in ${TESTS//,/ }; do
    per_request tessera "$t" "$TESSERA_BIN" --busy-poll-usec 0
    per_request redis "$t" "$(command -v redis-server)"
    per_request valkey "$t" "$(command -v valkey-server)"
    echo "$t: tessera ${IR[tessera,$t]} redis ${IR[redis,$t]} valkey ${IR[valkey,$t]}" >&2
done

{
    echo "# User-space instructions per request: tessera-node vs redis-server vs valkey-server"
    echo
    echo "$(date -u +%F), tessera-node $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'),"
    echo "redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2),"
    echo "valkey-server $(valkey-server --version | awk '{print $3}' | cut -d= -f2)."
    echo "valgrind --tool=callgrind; \`tessera-load pipe\`, 50 connections, -P $P; per request, the"
    echo "difference between a run of $N_B and one of $N_A requests on each server. tessera-node"
    echo "with --busy-poll-usec 0. User space only: the kernel's share (the same syscalls for all"
    echo "three) and cache misses are not counted."
    echo
    echo "| test | tessera | redis | valkey | tessera/redis | tessera/valkey |"
    echo "|---|---:|---:|---:|---:|---:|"
    for t in ${TESTS//,/ }; do
        tm=${IR[tessera,$t]}; rm_=${IR[redis,$t]}; vm=${IR[valkey,$t]}
        echo "| ${t^^} | $tm | $rm_ | $vm | $(ratio "$tm" "$rm_") | $(ratio "$tm" "$vm") |"
    done
} | tee "$OUT"
echo "saved $OUT"
