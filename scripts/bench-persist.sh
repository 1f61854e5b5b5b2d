#!/usr/bin/env bash
# bench-persist: SAVE time and load time of N keys (default 1M) for tessera-node vs
# redis-server 7.0 in the same run, as ratios; plus the worst client latency during a
# BGSAVE (redis-benchmark GETs running while the background save writes the file).
#
#   make bench-persist            # or: N=200000 bash scripts/bench-persist.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NODE="${NODE:-$ROOT/target/release/tessera-node}"
REDIS="${REDIS:-redis-server}"
N="${N:-1000000}"
PORT_NODE="${PORT_NODE:-9901}"
PORT_REDIS="${PORT_REDIS:-9902}"
WORK="$(mktemp -d /tmp/bench-persist.XXXXXX)"
PIDS=()

cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

[ -x "$NODE" ] || { echo "build first: cargo build --release -p tessera-node" >&2; exit 1; }
for p in "$PORT_NODE" "$PORT_REDIS"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p busy" >&2; exit 1; fi
done

now_ms() { date +%s%3N; }

# start <name> <port> <bin>: starts with --dir $WORK/<name>; echoes ms until PING answers PONG.
start() {
    local name=$1 port=$2 bin=$3 t0 t1
    mkdir -p "$WORK/$name"
    t0=$(now_ms)
    "$bin" --port "$port" --bind 127.0.0.1 --dir "$WORK/$name" --save "" --appendonly no \
        >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 6000); do
        if [ "$(redis-cli -p "$port" PING 2>/dev/null)" = "PONG" ]; then
            t1=$(now_ms); echo $((t1 - t0)); return 0
        fi
        sleep 0.01
    done
    echo "$name did not start" >&2; exit 1
}

stop() { redis-cli -p "$1" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; sleep 0.5; }

# N SETs through redis-cli --pipe: string values, every 10th key with a TTL, plus hashes.
gen() {
    awk -v n="$N" 'BEGIN {
        for (i = 0; i < n; i++) {
            k = "key:" i; v = "value-" i "-xxxxxxxxxxxxxxxx"
            if (i % 10 == 0) {
                printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nEX\r\n$6\r\n100000\r\n", length(k), k, length(v), v
            } else if (i % 10 == 1) {
                f = "f" i
                printf "*4\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(f), f, length(v), v
            } else {
                printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v
            }
        }
    }'
}
gen >"$WORK/load.resp"

timed_save() {
    local t0 t1
    t0=$(now_ms); redis-cli -p "$1" SAVE >/dev/null; t1=$(now_ms); echo $((t1 - t0))
}

declare -A SAVE LOAD SIZE
for who in node redis; do
    if [ $who = node ]; then port=$PORT_NODE; bin=$NODE; else port=$PORT_REDIS; bin=$REDIS; fi
    start $who $port "$bin" >/dev/null
    redis-cli -p $port --pipe <"$WORK/load.resp" >/dev/null
    keys=$(redis-cli -p $port DBSIZE)
    [ "$keys" = "$N" ] || { echo "$who has $keys keys, expected $N" >&2; exit 1; }
    SAVE[$who]=$(timed_save $port)
    SIZE[$who]=$(stat -c %s "$WORK/$who/dump.rdb")
    stop $port
    LOAD[$who]=$(start $who $port "$bin")
    keys=$(redis-cli -p $port DBSIZE)
    [ "$keys" = "$N" ] || { echo "$who loaded $keys keys, expected $N" >&2; exit 1; }
    if [ $who = node ]; then
        # Worst GET latency while a BGSAVE runs, vs the same benchmark without one.
        base=$(redis-benchmark -p $port -t get -n 200000 -c 8 -r "$N" 2>/dev/null \
            | awk '/latency summary/{getline; getline; print $6}')
        redis-cli -p $port BGSAVE >/dev/null
        during=$(redis-benchmark -p $port -t get -n 200000 -c 8 -r "$N" 2>/dev/null \
            | awk '/latency summary/{getline; getline; print $6}')
        while redis-cli -p $port INFO persistence | grep -q 'rdb_bgsave_in_progress:1'; do sleep 0.05; done
        bgtime=$(redis-cli -p $port INFO persistence | awk -F: '/rdb_last_bgsave_time_sec/{print $2}' | tr -d '\r')
    fi
    stop $port
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
echo "bench-persist: $N keys (90% strings, 10% of them with TTL, 10% small hashes)"
printf "%-8s %10s %10s %12s\n" "" "SAVE ms" "load ms" "dump bytes"
printf "%-8s %10s %10s %12s\n" tessera "${SAVE[node]}" "${LOAD[node]}" "${SIZE[node]}"
printf "%-8s %10s %10s %12s\n" redis "${SAVE[redis]}" "${LOAD[redis]}" "${SIZE[redis]}"
echo "ratios tessera/redis: SAVE $(ratio "${SAVE[node]}" "${SAVE[redis]}")  load $(ratio "${LOAD[node]}" "${LOAD[redis]}")"
echo "tessera GET max latency (redis-benchmark, 8 clients): ${base} ms idle, ${during} ms during BGSAVE (took ${bgtime}s)"
