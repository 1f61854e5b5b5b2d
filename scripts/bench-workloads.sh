#!/usr/bin/env bash
# Workloads beyond redis-benchmark's defaults: tessera-node vs redis-server 7.0 vs valkey-server
# 9.1 side by side on loopback, as bench-node.sh runs them (runs interleaved, the order of the
# servers rotating between repetitions, the median of REPS runs, the server's CPU time per
# request from /proc beside every throughput figure). Fresh servers for each workload, so that
# the RSS reported after it is that workload's:
#   conns    many connections: SET and GET at -P 1 with -c 1000 and -c 5000 (servers started
#            with --maxclients BENCH_MAXCLIENTS; every run checks that the server saw all the
#            clients connected at once (INFO connected_clients, sampled during the run) and
#            rejected none (INFO rejected_connections), and that redis-benchmark saw no error).
#   bigval   big values: SET and GET of 1 KB values at -P 1 and -P 16 and of 100 KB values at
#            -P 1 (-c 50), over a keyspace (-r) loaded first, so that values are overwritten and
#            memory stays bounded (keys x value size).
#   mix      a 90/10 GET/SET mix with Zipf popularity (tessera-load mix, 50 connections) over
#            BENCH_MIX_KEYS keys, all SET first (its --preload); rps and p50/p99/p999.
#   cluster  cluster mode: per server kind three masters (cluster-enabled, each node's
#            cluster-config-file in its own dir), slots split by `redis-cli --cluster create`;
#            redis-benchmark --cluster SET and GET over BENCH_CLUSTER_KEYS random keys at -P 1
#            and -P 16. CPU per request and RSS are the sums over the three processes.
#   events   a BGSAVE and a replica's full sync during load: standalone masters (dir of their
#            own, --save "", repl-diskless-sync yes with repl-diskless-sync-delay 0 on all
#            three, where redis's and valkey's default delay is 5 s) with BENCH_EVENT_KEYS keys;
#            a steady tessera-load mix for BENCH_EVENT_SECONDS without disturbance (baseline),
#            then with a BGSAVE started BENCH_EVENT_AT s into the load, then with a fresh replica
#            of the same kind (--replicaof) started then, which makes a full sync. Throughput
#            drop (%) and p99 of the whole window against the baseline, and how long the event
#            took (until rdb_bgsave_in_progress:0 / the replica's master_link_status:up). The
#            master's CPU includes its reaped children (the BGSAVE writer), /proc utime+stime+
#            cutime+cstime.
# Prints a markdown report and saves it as bench/workloads-<date>.md. Needs
# target/release/tessera-node and target/release/tessera-load (make bench-workloads builds them)
# and the reference servers (make deps). Raises `ulimit -n` to BENCH_MAXCLIENTS + 128 (fails if
# the hard limit is lower).
# Knobs (environment): BENCH_REPS (runs per test and server, the median is shown, default 5),
# BENCH_PARTS (the workloads to run, default "conns bigval mix cluster events"),
# BENCH_CONNS (client counts, default "1000 5000"), BENCH_CONN_N (requests per many-connection
# run, 100000), BENCH_MAXCLIENTS (10100),
# BENCH_BIG_N / BENCH_BIG_N16 (requests per 1 KB run at -P 1 / -P 16, 100000 / 1000000),
# BENCH_BIG_KEYS (1 KB keyspace, 100000), BENCH_HUGE_N (requests per 100 KB run, 40000),
# BENCH_HUGE_KEYS (100 KB keyspace, 1000),
# BENCH_MIX_KEYS (1000000), BENCH_MIX_SECONDS (per mix run, 8), BENCH_MIX_CONNS (50, the
# connections of the mix and of the events' load),
# BENCH_CLUSTER_KEYS (1000000), BENCH_CLUSTER_N1 / BENCH_CLUSTER_N16 (requests per cluster run
# at -P 1 / -P 16, 200000 / 2000000: redis-benchmark --cluster's rps is on a 250 ms grid, so
# the runs are a few seconds long),
# BENCH_EVENT_KEYS (1000000), BENCH_EVENT_SECONDS (load window per event run, 10),
# BENCH_EVENT_AT (seconds into the load when the event starts, 1), BENCH_SETTLE_S (seconds
# after a workload before its RSS is read, 2),
# TESSERA_BIN, TESSERA_LOAD (the binaries), BENCH_OUT (the report's path), BENCH_TESSERA_ARGS
# (directives added to tessera-node, e.g. "--busy-poll-usec 0").
# The defaults take about 20 minutes on 2 cores. Any run that fails (a server refusing a
# workload, an event that does not finish) is listed under "Failures" in the report and makes
# the script exit 1 after saving it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$ROOT/.tools/bin:$PATH"
REPS=${BENCH_REPS:-5}
PARTS=${BENCH_PARTS:-"conns bigval mix cluster events"}
CONNS=${BENCH_CONNS:-"1000 5000"}
CONN_N=${BENCH_CONN_N:-100000}
MAXCLIENTS=${BENCH_MAXCLIENTS:-10100}
BIG_N=${BENCH_BIG_N:-100000}
BIG_N16=${BENCH_BIG_N16:-1000000}
BIG_KEYS=${BENCH_BIG_KEYS:-100000}
HUGE_N=${BENCH_HUGE_N:-40000}
HUGE_KEYS=${BENCH_HUGE_KEYS:-1000}
MIX_KEYS=${BENCH_MIX_KEYS:-1000000}
MIX_SECONDS=${BENCH_MIX_SECONDS:-8}
MIX_CONNS=${BENCH_MIX_CONNS:-50}
CL_KEYS=${BENCH_CLUSTER_KEYS:-1000000}
CL_N1=${BENCH_CLUSTER_N1:-200000}
CL_N16=${BENCH_CLUSTER_N16:-2000000}
EV_KEYS=${BENCH_EVENT_KEYS:-1000000}
EV_SECONDS=${BENCH_EVENT_SECONDS:-10}
EV_AT=${BENCH_EVENT_AT:-1}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START=$(loadavg)
START_S=$SECONDS
die() { echo "bench-workloads: $*" >&2; exit 1; }
for part in $PARTS; do
    case $part in conns | bigval | mix | cluster | events) ;; *) die "unknown workload '$part' in BENCH_PARTS" ;; esac
done
BENCH_NAME=bench-workloads
# shellcheck source=scripts/bench-servers.sh
. "$ROOT/scripts/bench-servers.sh"

TESSERA_BIN=${TESSERA_BIN:-$ROOT/target/release/tessera-node}
TESSERA_LOAD=${TESSERA_LOAD:-$ROOT/target/release/tessera-load}
[ -x "$TESSERA_BIN" ] || die "missing $TESSERA_BIN (run make release)"
[ -x "$TESSERA_LOAD" ] || die "missing $TESSERA_LOAD (run make release)"
for b in redis-server valkey-server redis-benchmark redis-cli; do
    command -v "$b" >/dev/null || die "$b missing (make deps)"
done
bin_of() { # server kind -> its binary
    case $1 in
        tessera) echo "$TESSERA_BIN" ;;
        redis) command -v redis-server ;;
        valkey) command -v valkey-server ;;
    esac
}

# Enough file descriptors for BENCH_MAXCLIENTS connections in each server (they inherit the
# limit) and for redis-benchmark's clients.
MAXC=0
for c in $CONNS; do [ "$c" -gt "$MAXC" ] && MAXC=$c; done
[ "$MAXCLIENTS" -gt "$MAXC" ] || die "BENCH_MAXCLIENTS ($MAXCLIENTS) must exceed the largest of BENCH_CONNS ($MAXC)"
NEED_FDS=$((MAXCLIENTS + 128))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$NEED_FDS" ]; then
    hard=$(ulimit -Hn)
    [ "$hard" = unlimited ] || [ "$hard" -ge "$NEED_FDS" ] \
        || die "the hard limit of open files is $hard, $NEED_FDS needed (BENCH_MAXCLIENTS + 128)"
    ulimit -n "$NEED_FDS"
fi

SERVERS="tessera redis valkey"
ORDERS=("tessera redis valkey" "redis valkey tessera" "valkey tessera redis")
TICK_NS=$((1000000000 / $(getconf CLK_TCK)))
CLIENT_TIME=$TMP/client-time
cpu_ticks() { # pids... -> user+system clock ticks of the processes and their reaped children
    local p t=0
    for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$p/stat"))); done
    echo "$t"
}
status_kb() { # field pids... -> the sum of a /proc/<pid>/status field (kB)
    local f=$1 p t=0; shift
    for p in "$@"; do t=$((t + $(awk -v f="$f:" '$1 == f { print $2 }' "/proc/$p/status"))); done
    echo "$t"
}
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
info_field() { # port section field -> the value (empty when absent)
    redis-cli -p "$1" info "$2" 2>/dev/null | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'
}
forget_pid() { # pid: no longer ours to kill at exit (it has been reaped)
    local p keep=()
    for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}
stop_pids() { # pids...: SIGTERM, at most 10 s, then SIGKILL; reaped and forgotten
    local p st
    for p in "$@"; do kill "$p" 2>/dev/null || true; done
    for p in "$@"; do
        for _ in $(seq 100); do
            st=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null || echo gone)
            [ "$st" = Z ] || [ "$st" = gone ] && break
            sleep 0.1
        done
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
        forget_pid "$p"
    done
}
free_cluster_port() { # first port from $1 up that is free together with its bus port (+10000)
    local p=$1
    while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || (exec 3<>"/dev/tcp/127.0.0.1/$((p + 10000))") 2>/dev/null; do
        p=$((p + 1))
    done
    echo "$p"
}

# Results: RUN["metric|key|server"] holds one value per run (space-separated); the tables show
# the median. Metrics: rps, cpu (server ns per request), p50/p99/p999 (ms), cli (the load
# tool's CPU, % of one core), peak (connected_clients seen), ev (event ms); mem["key|server"]
# holds RSS and peak RSS (kB) after a workload.
declare -A RUN MEM
FAILS=()
add() { RUN["$1|$2|$3"]+="$4 "; }
fail() { # key server message: recorded, reported and the script's exit status
    FAILS+=("$1, $2: $3")
    echo "bench-workloads: FAILED $1 on $2: $3" >&2
}
median() { # numbers... -> the median (the lower middle for an even count)
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
med() { # metric key server -> the median of its runs, or n/a
    local v=${RUN["$1|$2|$3"]:-}
    # shellcheck disable=SC2086 # the runs are a space-separated list
    if [ -n "$v" ]; then median $v; else echo n/a; fi
}
client_pct() { awk '$1 > 0 { printf "%d", 100 * ($2 + $3) / $1 }' "$CLIENT_TIME"; }
port_of() { local v="P_$1"; echo "${!v}"; }
pids_of() { local v="PIDS_$1"; echo "${!v}"; }

# start_trio TAG [server args...]: fresh tessera, redis and valkey (named TAG_<kind>); their
# ports in P_<kind>, their pids in PIDS_<kind>; the previous trio is stopped first.
# shellcheck disable=SC2034 # read through port_of and pids_of
P_tessera="" P_redis="" P_valkey="" PIDS_tessera="" PIDS_redis="" PIDS_valkey=""
start_trio() {
    local tag=$1 srv port pidv; shift
    stop_trio
    port=11500
    for srv in $SERVERS; do
        port=$(free_port "$port")
        start "${tag}_$srv" "$(bin_of "$srv")" "$port" --dir "$TMP/${tag}_$srv" "$@"
        pidv="PID_${tag}_$srv"
        printf -v "P_$srv" %s "$port"
        printf -v "PIDS_$srv" %s "${!pidv}"
        port=$((port + 1))
    done
}
stop_trio() {
    local srv pids
    for srv in $SERVERS; do
        pids=$(pids_of "$srv")
        # shellcheck disable=SC2086 # a space-separated list of pids
        [ -z "$pids" ] || stop_pids $pids
        printf -v "PIDS_$srv" %s ""
    done
}
# RSS is read SETTLE_S (2) seconds after the workload's last run: the moment it ends, what a
# server holds depends on when its allocator next gives freed memory back (tessera: once a
# second; after 5,000 connections closed, 51 MB at once and 13 MB a second later), so a
# reading taken then measured that timing, not what the server keeps.
SETTLE_S=${BENCH_SETTLE_S:-2}
record_mem() { # key: RSS SETTLE_S after the workload and peak RSS (VmHWM) of each server's processes
    local srv pids
    sleep "$SETTLE_S"
    for srv in $SERVERS; do
        pids=$(pids_of "$srv")
        # shellcheck disable=SC2086
        MEM["$1|$srv"]="$(status_kb VmRSS $pids) $(status_kb VmHWM $pids)"
    done
}

# rb KEY SERVER N [redis-benchmark args...]: one redis-benchmark run (one test) against the
# server's first port; records rps, p99, CPU per request and the client's CPU. redis-benchmark
# 7.0 stops at the first error reply or lost connection: a non-zero exit or any message with
# "error" in it fails the run.
rb() {
    local key=$1 srv=$2 n=$3; shift 3
    local port pids c0 c1 out rc=0 line rps p99 client
    local -a f
    port=$(port_of "$srv"); pids=$(pids_of "$srv")
    # shellcheck disable=SC2086
    c0=$(cpu_ticks $pids)
    out=$( { TIMEFORMAT='%3R %3U %3S'; time redis-benchmark -p "$port" -n "$n" --csv "$@" 2>"$TMP/rb.err"; } 2>"$CLIENT_TIME") || rc=$?
    # shellcheck disable=SC2086
    c1=$(cpu_ticks $pids)
    if [ "$rc" != 0 ] || grep -qi error <<<"$out" || grep -qi error "$TMP/rb.err"; then
        fail "$key" "$srv" "redis-benchmark $* (exit $rc): $(grep -hi error "$TMP/rb.err" - <<<"$out" | head -3 | tr '\n' ' ')"
        return 0
    fi
    rps=""
    while read -r line; do
        # "SET","rps","avg","min","p50","p95","p99","max" (redis-benchmark 7.0's --csv)
        [[ $line =~ ^\"[^\"]*\",\"[0-9] ]] || continue
        IFS=, read -ra f <<<"${line//\"/}"
        rps=${f[1]}; p99=${f[6]}
    done <<<"$out"
    [ -n "$rps" ] || { fail "$key" "$srv" "no result from redis-benchmark $*"; return 0; }
    add rps "$key" "$srv" "$rps"
    add p99 "$key" "$srv" "$p99"
    add cpu "$key" "$srv" "$(( (c1 - c0) * TICK_NS / n ))"
    client=$(client_pct); [ -z "$client" ] || add cli "$key" "$srv" "$client"
}

# mix_parse KEY SERVER FILE: records tessera-load mix's rps and latencies; the number of
# requests served in SERVED (0 if the run failed).
mix_parse() {
    local key=$1 srv=$2 file=$3 line req err rps p50 p99 p999
    SERVED=0
    line=$(grep '^mix:' "$file" || true)
    [[ $line =~ requests=([0-9]+)\ errors=([0-9]+)\ rps=([0-9.]+)\ latency_ms\ p50=([0-9.]+)\ p99=([0-9.]+)\ p999=([0-9.]+) ]] \
        || { fail "$key" "$srv" "no result from tessera-load: $(head -c 300 "$file" | tr '\n' ' ')"; return 0; }
    req=${BASH_REMATCH[1]}; err=${BASH_REMATCH[2]}; rps=${BASH_REMATCH[3]}
    p50=${BASH_REMATCH[4]}; p99=${BASH_REMATCH[5]}; p999=${BASH_REMATCH[6]}
    [ "$err" = 0 ] || { fail "$key" "$srv" "$err error replies during the mix"; return 0; }
    [ "$req" -gt 0 ] || { fail "$key" "$srv" "no request served"; return 0; }
    add rps "$key" "$srv" "$rps"; add p50 "$key" "$srv" "$p50"
    add p99 "$key" "$srv" "$p99"; add p999 "$key" "$srv" "$p999"
    SERVED=$req
}

# mix_preload SERVER KEYS: SET key:0 .. key:<KEYS-1> with 16-byte values (tessera-load's preload).
mix_preload() {
    local srv=$1 keys=$2 port got
    port=$(port_of "$srv")
    "$TESSERA_LOAD" mix --addr "127.0.0.1:$port" --keys "$keys" --preload --seconds 0 >"$TMP/preload.out" 2>&1 \
        || { cat "$TMP/preload.out" >&2; die "preloading $keys keys into $srv failed"; }
    got=$(redis-cli -p "$port" dbsize)
    [ "$got" = "$keys" ] || die "$srv has $got keys after preloading $keys"
}

# Waits (bounded) until `redis-cli -p PORT info SECTION`, asked every 10 ms on one connection,
# shows the line LINE; prints "reached" if it did within SECONDS.
wait_info_line() { # port section line seconds
    local n
    n=$(awk -v s="$4" 'BEGIN { printf "%d", s * 100 }')
    # awk leaves at the line; redis-cli then dies of SIGPIPE, which is no failure.
    redis-cli -p "$1" -r "$n" -i 0.01 info "$2" 2>/dev/null \
        | awk -v want="$3" '{ sub(/\r$/, "") } $0 == want { print "reached"; exit }' || true
}

############################################################################################
# 1. Many connections.
if [[ " $PARTS " == *" conns "* ]]; then
    start_trio conns --maxclients "$MAXCLIENTS"
    for srv in $SERVERS; do
        got=$(redis-cli -p "$(port_of "$srv")" config get maxclients | tail -1)
        [ "$got" -ge "$MAXCLIENTS" ] || die "$srv runs with maxclients $got, not $MAXCLIENTS (file descriptor limit?)"
    done
    for c in $CONNS; do
        for t in set get; do
            for rep in $(seq "$REPS"); do
                for srv in ${ORDERS[$(( (rep - 1) % 3 ))]}; do
                    port=$(port_of "$srv")
                    # connected_clients sampled every 0.2 s during the run (bounded: 2 minutes).
                    echo 0 >"$TMP/peak"
                    ( max=0
                      for _ in $(seq 600); do
                          n=$(info_field "$port" clients connected_clients)
                          if [ -n "$n" ] && [ "$n" -gt "$max" ]; then
                              max=$n; echo "$max" >"$TMP/peak.new"; mv "$TMP/peak.new" "$TMP/peak"
                          fi
                          sleep 0.2
                      done ) &
                    sampler=$!; PIDS+=("$sampler")
                    rb "conns$c,$t" "$srv" "$CONN_N" -c "$c" -P 1 -t "$t"
                    stop_pids "$sampler"
                    peak=$(cat "$TMP/peak"); peak=${peak:-0}
                    # The sampler's own connection is one of them.
                    add peak "conns$c,$t" "$srv" "$((peak - 1))"
                    [ "$peak" -gt "$c" ] || fail "conns$c,$t" "$srv" "at most $((peak - 1)) of $c clients connected at once"
                    rej=$(info_field "$port" stats rejected_connections)
                    [ "${rej:-0}" = 0 ] || fail "conns$c,$t" "$srv" "rejected_connections:$rej"
                done
            done
        done
    done
    record_mem conns
fi

############################################################################################
# 2. Big values.
if [[ " $PARTS " == *" bigval "* ]]; then
    start_trio bigval
    # size:pipeline:requests:keyspace
    for cfg in "1024:1:$BIG_N:$BIG_KEYS" "1024:16:$BIG_N16:$BIG_KEYS" "102400:1:$HUGE_N:$HUGE_KEYS"; do
        IFS=: read -r d pipe n keys <<<"$cfg"
        if [ "${loaded:-}" != "$d" ]; then
            # Every key of the keyspace (almost: 3 x keys random SETs) at this size, once.
            for srv in $SERVERS; do
                port=$(port_of "$srv")
                redis-cli -p "$port" flushall >/dev/null
                redis-benchmark -p "$port" -c 50 -n $((3 * keys)) -P 16 -t set -d "$d" -r "$keys" -q >/dev/null 2>&1 \
                    || die "loading $keys keys of $d bytes into $srv failed"
            done
            loaded=$d
        fi
        for t in set get; do
            for rep in $(seq "$REPS"); do
                for srv in ${ORDERS[$(( (rep - 1) % 3 ))]}; do
                    rb "big$d,P$pipe,$t" "$srv" "$n" -c 50 -P "$pipe" -d "$d" -r "$keys" -t "$t"
                done
            done
        done
    done
    record_mem bigval
fi

############################################################################################
# 3. 90/10 GET/SET Zipf mix.
if [[ " $PARTS " == *" mix "* ]]; then
    start_trio mix
    for srv in $SERVERS; do mix_preload "$srv" "$MIX_KEYS"; done
    for rep in $(seq "$REPS"); do
        for srv in ${ORDERS[$(( (rep - 1) % 3 ))]}; do
            pids=$(pids_of "$srv")
            # shellcheck disable=SC2086
            c0=$(cpu_ticks $pids)
            { TIMEFORMAT='%3R %3U %3S'; time "$TESSERA_LOAD" mix --addr "127.0.0.1:$(port_of "$srv")" \
                --keys "$MIX_KEYS" --conns "$MIX_CONNS" --get-ratio 0.9 --seconds "$MIX_SECONDS" \
                >"$TMP/mix.out" 2>&1; } 2>"$CLIENT_TIME" || true
            # shellcheck disable=SC2086
            c1=$(cpu_ticks $pids)
            mix_parse mix "$srv" "$TMP/mix.out"
            if [ "$SERVED" -gt 0 ]; then
                add cpu mix "$srv" "$(( (c1 - c0) * TICK_NS / SERVED ))"
                client=$(client_pct); [ -z "$client" ] || add cli mix "$srv" "$client"
            fi
        done
    done
    record_mem mix
fi

############################################################################################
# 4. Cluster mode: three masters per server kind, all three clusters up side by side.
if [[ " $PARTS " == *" cluster "* ]]; then
    stop_trio
    port=11600
    for srv in $SERVERS; do
        nodes=() pids=""
        for i in 1 2 3; do
            port=$(free_cluster_port "$port")
            name="cluster_${srv}_$i"
            start "$name" "$(bin_of "$srv")" "$port" --dir "$TMP/$name" --cluster-enabled yes \
                --cluster-config-file "$TMP/$name/nodes.conf"
            pidv="PID_$name"; pids="$pids ${!pidv}"
            nodes+=("127.0.0.1:$port")
            if [ "$i" = 1 ]; then printf -v "P_$srv" %s "$port"; fi
            port=$((port + 1))
        done
        printf -v "PIDS_$srv" %s "${pids# }"
        redis-cli --cluster create "${nodes[@]}" --cluster-yes >"$TMP/create-$srv.log" 2>&1 \
            || { cat "$TMP/create-$srv.log" >&2; die "redis-cli --cluster create failed for $srv"; }
        for node in "${nodes[@]}"; do
            ok=""
            for _ in $(seq 300); do
                redis-cli -p "${node#*:}" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && { ok=1; break; }
                sleep 0.1
            done
            [ -n "$ok" ] || die "$srv node $node not cluster_state:ok within 30 s"
        done
        redis-benchmark --cluster -p "$(port_of "$srv")" -c 50 -n $((2 * CL_KEYS)) -P 16 -t set -r "$CL_KEYS" -q >/dev/null 2>&1 \
            || die "loading the $srv cluster failed"
    done
    for pipe in 1 16; do
        n=$CL_N1; [ "$pipe" = 16 ] && n=$CL_N16
        for t in set get; do
            for rep in $(seq "$REPS"); do
                for srv in ${ORDERS[$(( (rep - 1) % 3 ))]}; do
                    rb "cluster,P$pipe,$t" "$srv" "$n" --cluster -c 50 -P "$pipe" -r "$CL_KEYS" -t "$t"
                done
            done
        done
    done
    record_mem cluster
    stop_trio
fi

############################################################################################
# 5. BGSAVE and a replica's full sync during load.
if [[ " $PARTS " == *" events "* ]]; then
    start_trio events --repl-diskless-sync yes --repl-diskless-sync-delay 0
    for srv in $SERVERS; do mix_preload "$srv" "$EV_KEYS"; done
    for rep in $(seq "$REPS"); do
        for srv in ${ORDERS[$(( (rep - 1) % 3 ))]}; do
            port=$(port_of "$srv"); pids=$(pids_of "$srv")
            for ev in base bgsave sync; do
                key="events,$ev"
                # shellcheck disable=SC2086
                c0=$(cpu_ticks $pids)
                { TIMEFORMAT='%3R %3U %3S'; time "$TESSERA_LOAD" mix --addr "127.0.0.1:$port" --keys "$EV_KEYS" \
                    --conns "$MIX_CONNS" --get-ratio 0.9 --seconds "$EV_SECONDS" >"$TMP/ev.out" 2>&1; } 2>"$CLIENT_TIME" &
                lp=$!; PIDS+=("$lp")
                seen=""
                bound=$((EV_SECONDS + 60))
                if [ "$ev" = bgsave ]; then
                    sleep "$EV_AT"
                    t0=$(now_ms)
                    reply=$(redis-cli -p "$port" bgsave 2>&1)
                    if [[ $reply == *started* ]]; then
                        seen=$(wait_info_line "$port" persistence rdb_bgsave_in_progress:0 "$bound")
                        t1=$(now_ms)
                        if [ "$seen" = reached ]; then add ev "$key" "$srv" $((t1 - t0)); else fail "$key" "$srv" "BGSAVE still running after ${bound}s"; fi
                        st=$(info_field "$port" persistence rdb_last_bgsave_status)
                        [ "$st" = ok ] || fail "$key" "$srv" "rdb_last_bgsave_status:$st"
                    else
                        fail "$key" "$srv" "BGSAVE answered: $reply"
                    fi
                elif [ "$ev" = sync ]; then
                    sleep "$EV_AT"
                    rname="events_${srv}_replica"
                    rm -rf "${TMP:?}/$rname"
                    rport=$(free_port 11700)
                    t0=$(now_ms)
                    start "$rname" "$(bin_of "$srv")" "$rport" --dir "$TMP/$rname" --replicaof 127.0.0.1 "$port"
                    pidv="PID_$rname"; rpid=${!pidv}
                    seen=$(wait_info_line "$rport" replication master_link_status:up "$bound")
                    t1=$(now_ms)
                    if [ "$seen" = reached ]; then add ev "$key" "$srv" $((t1 - t0)); else fail "$key" "$srv" "the replica's link not up after ${bound}s"; fi
                    rkeys=$(redis-cli -p "$rport" dbsize)
                    [ "$rkeys" -ge "$EV_KEYS" ] || fail "$key" "$srv" "the replica has $rkeys keys of $EV_KEYS"
                fi
                rc=0; wait "$lp" || rc=$?
                forget_pid "$lp"
                if [ "$ev" = sync ]; then
                    stop_pids "$rpid"
                    rm -rf "${TMP:?}/$rname"
                fi
                # The master's sync or save child reaped, so that its CPU is counted.
                [ "$(wait_info_line "$port" persistence rdb_bgsave_in_progress:0 30)" = reached ] \
                    || fail "$key" "$srv" "a background save still running 30 s after the load"
                # shellcheck disable=SC2086
                c1=$(cpu_ticks $pids)
                [ "$rc" = 0 ] || fail "$key" "$srv" "tessera-load exited $rc: $(head -c 300 "$TMP/ev.out" | tr '\n' ' ')"
                mix_parse "$key" "$srv" "$TMP/ev.out"
                if [ "$SERVED" -gt 0 ]; then
                    add cpu "$key" "$srv" "$(( (c1 - c0) * TICK_NS / SERVED ))"
                    client=$(client_pct); [ -z "$client" ] || add cli "$key" "$srv" "$client"
                fi
            done
            rm -f "$TMP/events_$srv/dump.rdb"
        done
    done
    record_mem events
    stop_trio
fi
LOAD_END=$(loadavg)

############################################################################################
# The report.
ratio() { # a b -> a/b with 2 decimals, or n/a
    if [[ "$1" == n/a || -z "$1" || -z "$2" || "$2" == n/a ]]; then echo "n/a"; else
        awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; fi
}
best_of() { # the larger of two throughputs, n/a ignored
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a") print b; else if (b == "n/a") print a; else print (a + 0 > b + 0) ? a : b }'
}
int() { if [ "$1" = n/a ]; then echo n/a; else printf '%.0f' "$1"; fi; }
drop() { # baseline event -> throughput drop in % (negative: a gain)
    if [[ "$1" == n/a || "$2" == n/a ]]; then echo n/a; else
        awk -v a="$1" -v b="$2" 'BEGIN { if (a == 0) print "n/a"; else printf "%.1f", 100 * (1 - b / a) }'; fi
}
triple() { # metric key [int] -> "t / r / v"
    local srv out="" v
    for srv in $SERVERS; do
        v=$(med "$1" "$2" "$srv"); [ "${3:-}" = int ] && v=$(int "$v")
        out="$out${out:+ / }$v"
    done
    echo "$out"
}
HEAD="| rps tessera | rps redis | rps valkey | tessera/redis | tessera/best | CPU ns/req tessera | redis | valkey | p99 ms tessera | redis | valkey | client % t/r/v |"
SEP="|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
row() { # label key [extra cell]: the standard row of a table under HEAD
    local t r v
    t=$(med rps "$2" tessera); r=$(med rps "$2" redis); v=$(med rps "$2" valkey)
    echo "| $1 | $(int "$t") | $(int "$r") | $(int "$v") | $(ratio "$t" "$r") | $(ratio "$t" "$(best_of "$r" "$v")") | $(med cpu "$2" tessera) | $(med cpu "$2" redis) | $(med cpu "$2" valkey) | $(med p99 "$2" tessera) | $(med p99 "$2" redis) | $(med p99 "$2" valkey) | $(triple cli "$2") |${3:+ $3 |}"
}
mb() { # key server which(1: RSS, 2: peak) -> MB
    local v=${MEM["$1|$2"]:-}
    if [ -z "$v" ]; then echo n/a; else awk -v k="$(echo "$v" | cut -d' ' -f"$3")" 'BEGIN { printf "%.1f", k / 1024 }'; fi
}

DATE=$(date -u +%Y-%m-%d)
mkdir -p bench
OUT=${BENCH_OUT:-bench/workloads-$DATE.md}
ELAPSED=$((SECONDS - START_S))
{
    echo "# Workloads beyond redis-benchmark's defaults: tessera-node vs redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2) vs valkey-server $(valkey-server --version | awk '{print $3}' | cut -d= -f2)"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, loopback, median of $REPS interleaved runs per test and server (the order of the servers rotating between runs), fresh servers for each workload; the run took $((ELAPSED / 60)) min $((ELAPSED % 60)) s."
    tessera_args_note
    echo "Load average (1/5/15 min) at the start: $LOAD_START; at the end: $LOAD_END."
    echo "Ratios > 1.00 mean tessera is faster; tessera/best is against the faster of redis and valkey. CPU ns/req: the server's"
    echo "utime+stime (+ reaped children) over the run divided by the requests served (lower is better). client %: the load"
    echo "tool's own CPU (user+system over wall time, % of one core); near 100% it, not the server, sets the throughput."
    if [[ " $PARTS " == *" conns "* ]]; then
        echo
        echo "## Many connections"
        echo
        echo "redis-benchmark -P 1, -n $CONN_N, servers at --maxclients $MAXCLIENTS. Last column: the fewest clients the server had connected at once"
        echo "(INFO connected_clients sampled every 0.2 s, less the sampler's own connection) over the runs, t/r/v."
        echo
        echo "| test $HEAD peak clients t/r/v |"
        echo "$SEP---|"
        for c in $CONNS; do
            for t in set get; do
                mins=""
                for srv in $SERVERS; do
                    # shellcheck disable=SC2086
                    m=$(printf '%s\n' ${RUN["peak|conns$c,$t|$srv"]:-n/a} | sort -g | head -1)
                    mins="$mins${mins:+/}$m"
                done
                row "${t^^} -c $c" "conns$c,$t" "$mins"
            done
        done
    fi
    if [[ " $PARTS " == *" bigval "* ]]; then
        echo
        echo "## Big values"
        echo
        echo "redis-benchmark -c 50 -d <size> -r <keyspace>, the keyspace loaded first: 1 KB values over $BIG_KEYS keys (-n $BIG_N at -P 1, $BIG_N16 at -P 16),"
        echo "100 KB values over $HUGE_KEYS keys (-n $HUGE_N)."
        echo
        echo "| test $HEAD"
        echo "$SEP"
        for cfg in 1024:1 1024:16 102400:1; do
            IFS=: read -r d pipe <<<"$cfg"
            for t in set get; do
                label="${t^^} $((d / 1024)) KB -P $pipe"
                row "$label" "big$d,P$pipe,$t"
            done
        done
    fi
    if [[ " $PARTS " == *" mix "* ]]; then
        echo
        echo "## 90/10 GET/SET Zipf mix"
        echo
        echo "tessera-load mix: $MIX_CONNS connections, -P 1, GET 90% / SET 10% of 16-byte values, Zipf 0.99 over $MIX_KEYS keys (all SET first), $MIX_SECONDS s per run."
        echo
        echo "| test $HEAD p50 ms t/r/v | p999 ms t/r/v |"
        echo "$SEP---|---|"
        row "GET/SET 90/10" mix "$(triple p50 mix) | $(triple p999 mix)"
    fi
    if [[ " $PARTS " == *" cluster "* ]]; then
        echo
        echo "## Cluster mode, 3 masters per server kind"
        echo
        echo "redis-benchmark --cluster -c 50 -r $CL_KEYS (the keyspace SET first at -P 16, 2 x $CL_KEYS requests), -n $CL_N1 at -P 1, $CL_N16 at -P 16."
        echo "CPU per request: the three processes together. In cluster mode redis-benchmark runs one thread per master, and a"
        echo "threaded run ends only on its 250 ms timer: its elapsed time, so its rps, is rounded to that grid (the last column: one"
        echo "step of the grid in % of the run, t/r/v). The CPU per request does not depend on it."
        echo
        echo "| test $HEAD grid % t/r/v |"
        echo "$SEP---|"
        for pipe in 1 16; do
            n=$CL_N1; [ "$pipe" = 1 ] || n=$CL_N16
            for t in set get; do
                grid=""
                for srv in $SERVERS; do
                    grid="$grid${grid:+/}$(awk -v r="$(med rps "cluster,P$pipe,$t" "$srv")" -v n="$n" 'BEGIN { if (r == "n/a") print "n/a"; else printf "%.1f", 100 * 0.25 * r / n }')"
                done
                row "${t^^} -P $pipe" "cluster,P$pipe,$t" "$grid"
            done
        done
    fi
    if [[ " $PARTS " == *" events "* ]]; then
        echo
        echo "## BGSAVE and a replica's full sync during load"
        echo
        echo "tessera-load mix ($MIX_CONNS connections, -P 1, GET 90% / SET 10%, Zipf 0.99) over $EV_KEYS preloaded keys for $EV_SECONDS s per run;"
        echo "the event starts ${EV_AT} s into the load. Figures are over the whole window (compare the event's duration with it). Masters with"
        echo "repl-diskless-sync yes, repl-diskless-sync-delay 0; the replica is a fresh process of the same kind (--replicaof), stopped after each run."
        echo "A master keeps feeding its replication backlog after its first replica left, so baselines after the first sync include that."
        echo
        echo "| event $HEAD"
        echo "$SEP"
        row baseline events,base
        row "BGSAVE" events,bgsave
        row "replica full sync" events,sync
        echo
        echo "| event | rps drop % tessera | redis | valkey | p99 ms vs baseline tessera | redis | valkey | event ms tessera | redis | valkey |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for ev in bgsave sync; do
            line="| $([ $ev = bgsave ] && echo BGSAVE || echo "replica full sync") |"
            for srv in $SERVERS; do line="$line $(drop "$(med rps events,base "$srv")" "$(med rps "events,$ev" "$srv")") |"; done
            for srv in $SERVERS; do line="$line $(med p99 events,base "$srv") → $(med p99 "events,$ev" "$srv") |"; done
            for srv in $SERVERS; do
                ms=$(med ev "events,$ev" "$srv")
                # An event that outlasted the load: the window saw only part of it.
                if [ "$ms" != n/a ] && awk -v m="$ms" -v s="$EV_SECONDS" -v a="$EV_AT" 'BEGIN { exit !(m > 1000 * (s - a)) }'; then
                    ms="$ms (past the window)"
                fi
                line="$line $ms |"
            done
            echo "$line"
        done
    fi
    echo
    echo "## Memory"
    echo
    echo "RSS (VmRSS) of the server ${SETTLE_S} s after each workload, and its peak (VmHWM), MB; cluster: the three nodes together; events: the master."
    echo
    echo "| workload | RSS tessera | redis | valkey | tessera/redis | peak tessera | redis | valkey |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for part in $PARTS; do
        echo "| $part | $(mb "$part" tessera 1) | $(mb "$part" redis 1) | $(mb "$part" valkey 1) | $(ratio "$(mb "$part" tessera 1)" "$(mb "$part" redis 1)") | $(mb "$part" tessera 2) | $(mb "$part" redis 2) | $(mb "$part" valkey 2) |"
    done
    if [ "${#FAILS[@]}" -gt 0 ]; then
        echo
        echo "## Failures"
        echo
        for f in "${FAILS[@]}"; do echo "- $f"; done
    fi
} | tee "$OUT"
echo "saved $OUT"
[ "${#FAILS[@]}" = 0 ] || die "${#FAILS[@]} run(s) failed (see Failures in $OUT)"
