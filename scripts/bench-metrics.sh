#!/usr/bin/env bash
# What serving /metrics costs (issue 22): redis-benchmark SET and GET at -P 16 (50 clients)
# against tessera-node with metrics-port on, with and without a scraper fetching /metrics
# every second, runs alternated, median of BENCH_REPS (default 5). redis-server 7.0 runs the
# same load in the same run as the reference (it has no /metrics). Server CPU per request comes
# from /proc/<pid>/stat (utime + stime over the run, the scrapes included). Prints a table and
# saves it as bench/metrics-<date>.md (BENCH_OUT to change).
# Needs target/release/tessera-node (make bench-metrics builds it), redis-server, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$ROOT/.tools/bin:$PATH"
N=${BENCH_N:-4000000}
REPS=${BENCH_REPS:-5}
TESSERA_BIN=${TESSERA_BIN:-$ROOT/target/release/tessera-node}
[ -x "$TESSERA_BIN" ] || { echo "missing $TESSERA_BIN (run make release)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server missing (make deps)" >&2; exit 1; }
command -v redis-benchmark >/dev/null || { echo "redis-benchmark missing (make deps)" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl missing" >&2; exit 1; }
BENCH_NAME=bench-metrics
# shellcheck source=scripts/bench-servers.sh
. "$ROOT/scripts/bench-servers.sh"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# run name pid port test -> prints "rps cpu_us_per_request"
run() {
    local pid=$2 port=$3 test=$4 before after rps
    before=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p "$port" -c 50 -P 16 -n "$N" -t "$test" -r 100000 --csv -q \
        | awk -F'"' 'NR > 1 || $2 != "test" { print $4; exit }')
    after=$(cpu_ticks "$pid")
    awk -v r="$rps" -v t=$((after - before)) -v hz="$TICK" -v n="$N" \
        'BEGIN { printf "%s %.3f\n", r, t / hz * 1e6 / n }'
}

P_T=$(free_port 12801); M_T=$(free_port $((P_T + 1))); P_R=$(free_port $((M_T + 1)))
start tessera "$TESSERA_BIN" "$P_T" --metrics-port "$M_T"
start redis redis-server "$P_R"
curl -sf "http://127.0.0.1:$M_T/metrics" >/dev/null || { echo "tessera-node serves no /metrics" >&2; exit 1; }

SCRAPES=$TMP/scrapes
scraper_start() {
    ( while :; do
        curl -sf -o /dev/null "http://127.0.0.1:$M_T/metrics" && echo x >>"$SCRAPES"
        sleep 1
      done ) &
    SCRAPER=$!
}
scraper_stop() { kill "$SCRAPER" 2>/dev/null || true; wait "$SCRAPER" 2>/dev/null || true; }

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

declare -A RPS CPU
for test in set get; do
    for rep in $(seq "$REPS"); do
        # Alternate which goes first, so a drift in the machine's speed hits both alike.
        order="plain scraped"; [ $((rep % 2)) -eq 0 ] && order="scraped plain"
        for mode in $order; do
            [ "$mode" = scraped ] && scraper_start
            read -r r c < <(run tessera "$PID_tessera" "$P_T" "$test")
            [ "$mode" = scraped ] && scraper_stop
            RPS[$test,$mode]+="$r "; CPU[$test,$mode]+="$c "
        done
        read -r r c < <(run redis "$PID_redis" "$P_R" "$test")
        RPS[$test,redis]+="$r "; CPU[$test,redis]+="$c "
    done
done
NSCRAPES=$(wc -l <"$SCRAPES" 2>/dev/null || echo 0)
BODY=$(curl -sf "http://127.0.0.1:$M_T/metrics")
SERIES=$(grep -vc '^#' <<<"$BODY")
BYTES=$(wc -c <<<"$BODY")

OUT=${BENCH_OUT:-bench/metrics-$(date -u +%Y-%m-%d).md}
{
    echo "# /metrics scrape overhead, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "redis-benchmark -c 50 -P 16 -n $N -r 100000, median of $REPS runs per cell, runs alternated;"
    echo "\"scraped\": a client fetched /metrics every second during the run ($NSCRAPES scrapes in all,"
    echo "$SERIES series, $BYTES bytes each). CPU: server utime + stime per request (scrapes included)."
    echo "Load average at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg). $(nproc) cores."
    echo
    echo "| test | tessera rps | tessera rps, scraped | scraped / plain | tessera us CPU/req | scraped us CPU/req | redis-server rps | redis us CPU/req |"
    echo "|---|---|---|---|---|---|---|---|"
    for test in set get; do
        p=$(tr ' ' '\n' <<<"${RPS[$test,plain]}" | grep . | median)
        s=$(tr ' ' '\n' <<<"${RPS[$test,scraped]}" | grep . | median)
        r=$(tr ' ' '\n' <<<"${RPS[$test,redis]}" | grep . | median)
        cp=$(tr ' ' '\n' <<<"${CPU[$test,plain]}" | grep . | median)
        cs=$(tr ' ' '\n' <<<"${CPU[$test,scraped]}" | grep . | median)
        cr=$(tr ' ' '\n' <<<"${CPU[$test,redis]}" | grep . | median)
        ratio=$(awk -v a="$s" -v b="$p" 'BEGIN { printf "%.3f", a / b }')
        echo "| ${test^^} | $p | $s | $ratio | $cp | $cs | $r | $cr |"
    done
    echo
    echo "Raw runs (rps):"
    for k in "${!RPS[@]}"; do echo "- $k: ${RPS[$k]}"; done | sort
} | tee "$OUT"
echo "saved $OUT"
