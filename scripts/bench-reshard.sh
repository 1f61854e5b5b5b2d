#!/usr/bin/env bash
# bench-reshard: time to move a quarter of the slots of a cluster holding KEYS keys of 100
# bytes, in one run, with three tools:
#   1. redis-cli --cluster rebalance on redis-server 7.0 (key by key, MIGRATE);
#   2. `tessera-operator converge` on tessera-node (atomic slot migration, MIGRATESLOTS);
#   3. valkey-server 9.1's own CLUSTER MIGRATESLOTS, the same 4096 slots (1365-1366 from
#      each master), timed until every job reports success.
# Each tool does four moves on one cluster: 3 -> 4 masters (scale out), 4 -> 3 (scale in:
# the 4th master gives its slots back), then both again with a writer running
# (`tessera-load writer`: WRITER_RATE SETs a second through a cluster client, which follows
# MOVED and ASK and retries TRYAGAIN up to 5 times; every acknowledged write is read back).
# Joining the 4th node is the same for all and is not timed. After every move the script
# checks the key count and that all 16384 slots are covered. Prints the times, the ratios to
# tessera and the writer's tally (failed writes: the client gave up; lost: acknowledged and
# not read back).
#
#   KEYS=1000000 WRITER_RATE=2000 ENGINE_ARGS="--parallel 16" bash scripts/bench-reshard.sh
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1000000}
REDIS=${REDIS:-/usr/bin/redis-server}
TESSERA=${TESSERA:-target/release/tessera-node}
VALKEY=${VALKEY:-.tools/bin/valkey-server}
for b in "$REDIS" "$TESSERA" "$VALKEY"; do
  [ -x "$b" ] || { echo "server binary missing: $b (make deps release)" >&2; exit 1; }
done
BASE_PORT=${BASE_PORT:-22100}
WRITER_RATE=${WRITER_RATE:-2000}
OP=target/release/tessera-operator
LOAD=target/release/tessera-load
WORK=$(mktemp -d /tmp/bench-reshard.XXXXXX)
PIDS=()

cleanup() {
  [ -z "${WRITER_PID:-}" ] || kill "$WRITER_PID" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -x "$OP" ] || cargo build --release -q -p tessera-operator --bin tessera-operator
[ -x "$LOAD" ] || cargo build --release -q -p tessera-load --bin tessera-load

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Pick 4 ports (and bus ports) that are free.
PORTS=()
p=$BASE_PORT
while [ ${#PORTS[@]} -lt 4 ]; do
  if port_free "$p" && port_free $((p + 10000)); then PORTS+=("$p"); fi
  p=$((p + 1))
  [ "$p" -lt 22999 ] || { echo "no free ports" >&2; exit 1; }
done

# Key files: RESP SET commands for KEYS keys, one file per slot range of a 3-master
# `redis-cli --cluster create` (0-5460, 5461-10922, 10923-16383), generated once.
python3 - "$KEYS" "$WORK" <<'EOF'
import sys
n, work = int(sys.argv[1]), sys.argv[2]
tab = []
for i in range(256):
    c = i << 8
    for _ in range(8):
        c = ((c << 1) ^ 0x1021) if c & 0x8000 else (c << 1)
    tab.append(c & 0xFFFF)
def slot(k):
    c = 0
    for b in k:
        c = ((c << 8) & 0xFFFF) ^ tab[((c >> 8) ^ b) & 0xFF]
    return c & 0x3FFF
val = b"v" * 100
files = [open(f"{work}/keys{i}.resp", "wb") for i in range(3)]
for i in range(n):
    k = b"key:%d" % i
    s = slot(k)
    f = files[0 if s <= 5460 else 1 if s <= 10922 else 2]
    f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(k), k, val))
for f in files:
    f.close()
EOF

# start_nodes <run name> <server binary>
start_nodes() {
  PIDS=()
  for port in "${PORTS[@]}"; do
    local d="$WORK/$1/$port"
    mkdir -p "$d"
    "$2" --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file nodes.conf --cluster-node-timeout 5000 --dir "$d" \
      --save "" --appendonly no --protected-mode no --logfile "$d/log" &
    PIDS+=($!)
  done
  for port in "${PORTS[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  redis-cli --cluster create "127.0.0.1:${PORTS[0]}" "127.0.0.1:${PORTS[1]}" \
    "127.0.0.1:${PORTS[2]}" --cluster-yes >/dev/null
  for _ in $(seq 100); do
    out=$(redis-cli --cluster check "127.0.0.1:${PORTS[0]}" 2>/dev/null || true)
    grep -q "All 16384 slots covered" <<<"$out" && break
    sleep 0.2
  done
  for i in 0 1 2; do
    for _ in $(seq 100); do
      grep -q "cluster_state:ok" <<<"$(redis-cli -p "${PORTS[$i]}" cluster info)" && break
      sleep 0.2
    done
  done
  for i in 0 1 2; do
    redis-cli -p "${PORTS[$i]}" --pipe <"$WORK/keys$i.resp" >/dev/null
  done
}

stop_nodes() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
}

# Keys on the masters (a drained 4th node may be a replica holding a copy).
total_keys() {
  local t=0
  for port in "${PORTS[@]}"; do
    [ "$(redis-cli -p "$port" role | head -1)" = master ] || continue
    t=$((t + $(redis-cli -p "$port" dbsize)))
  done
  echo "$t"
}

now() { date +%s.%N; }

# Join the 4th node with `redis-cli --cluster add-node` and wait until every node knows every
# other and all report cluster_state:ok (a new node waits up to cluster-node-timeout before it
# turns ok, and refuses RESTORE-ASKING until then). This part is the same for both tools and is
# not timed; the timed part is the resharding itself.
join_fourth() {
  redis-cli --cluster add-node "127.0.0.1:${PORTS[3]}" "127.0.0.1:${PORTS[0]}" >"$WORK/add-node.log" 2>&1 \
    || { cat "$WORK/add-node.log" >&2; exit 1; }
  for _ in $(seq 300); do
    local good=0
    for port in "${PORTS[@]}"; do
      local nodes info
      nodes=$(redis-cli -p "$port" cluster nodes)
      info=$(redis-cli -p "$port" cluster info)
      if [ "$(grep -c ' connected' <<<"$nodes")" -eq 4 ] && ! grep -q handshake <<<"$nodes" \
        && grep -q "cluster_state:ok" <<<"$info"; then
        good=$((good + 1))
      fi
    done
    [ "$good" -eq 4 ] && return 0
    sleep 0.1
  done
  echo "4th node did not join" >&2
  exit 1
}

# The 4th node's id, and each master's share for it: the last quarter of its slots, as
# lines "<master index> <first> <last> <4th node id>".
migrateslots_args() {
  local id4
  id4=$(redis-cli -p "${PORTS[3]}" cluster myid)
  for i in 0 1 2; do
    local range first last n take
    range=$(redis-cli -p "${PORTS[$i]}" cluster nodes | awk '/myself/ {print $9}')
    first=${range%-*}; last=${range#*-}
    n=$((last - first + 1)); take=$(( (n + 3) / 4 ))
    [ "$i" -eq 2 ] && take=$((4096 - 2 * ((5461 + 3) / 4)))
    echo "$i $((last - take + 1)) $last $id4"
  done
}


# Every move is checked the same way: no key lost, every slot covered, and the 4th master
# holding the slots it should (4096 after a scale out, none after a scale in).
EXPECT_KEYS=$KEYS
check_move() { # <tool> <slots the 4th master should hold>
  local total
  total=$(total_keys)
  [ "$total" -eq "$EXPECT_KEYS" ] || { echo "$1 lost keys: $total of $EXPECT_KEYS" >&2; exit 1; }
  grep -q "All 16384 slots covered" <<<"$(redis-cli --cluster check "127.0.0.1:${PORTS[0]}")" \
    || { echo "$1: slots not covered" >&2; exit 1; }
  local held
  # As the first master sees it: the 4th node may be loading a full sync (a drained master
  # turns replica), and answers LOADING meanwhile.
  held=$(redis-cli -p "${PORTS[0]}" cluster nodes | awk -v a="127.0.0.1:${PORTS[3]}@" \
    'index($2, a) == 1 {n=0; for (i=9;i<=NF;i++) {split($i,r,"-"); if (r[2]=="") r[2]=r[1]; if ($i !~ /^\[/) n+=r[2]-r[1]+1}; print n}')
  [ "$held" -eq "$2" ] || { echo "$1: the 4th master holds $held slots, not $2" >&2; exit 1; }
}

# A writer for one move: started before the clock, stopped after it. Its keys join the
# expected count (a failed write may or may not have landed: both are accepted).
WRITER_PID=
writer_start() { # <prefix>
  "$LOAD" writer --rate "$WRITER_RATE" --prefix "$1" "${PORTS[@]/#/127.0.0.1:}" \
    >"$WORK/writer.$1" 2>"$WORK/writer.$1.err" &
  WRITER_PID=$!
  sleep 0.5
}
WRITER_TALLY=
writer_stop() { # <prefix>: sets WRITER_TALLY, adjusts EXPECT_KEYS
  kill -TERM "$WRITER_PID"
  wait "$WRITER_PID" || { cat "$WORK/writer.$1.err" >&2; exit 1; }
  local line acked failed extra
  line=$(cat "$WORK/writer.$1")
  acked=$(sed -n 's/.*acked=\([0-9]*\).*/\1/p' <<<"$line")
  failed=$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<<"$line")
  extra=$(( $(total_keys) - EXPECT_KEYS ))
  [ "$extra" -ge "$acked" ] && [ "$extra" -le $((acked + failed)) ] \
    || { echo "writer $1: $extra new keys for $acked acked, $failed failed" >&2; exit 1; }
  EXPECT_KEYS=$((EXPECT_KEYS + extra))
  WRITER_TALLY=${line#writer: }
}

# Before a scale out, untimed: the 4th node must be an empty master. A master that gave
# away its last slot turns replica of the node that took it (Redis 7.0's and Valkey's rule,
# which tessera-node follows), so it is reset (a replica's reset also empties it; HARD gives
# it a new id), the others forget its old id, and it joins again.
ready_fourth() {
  [ "$(redis-cli -p "${PORTS[3]}" role | head -1)" = master ] && return 0
  local old r
  old=$(redis-cli -p "${PORTS[3]}" cluster myid)
  r=$(redis-cli -p "${PORTS[3]}" cluster reset hard)
  [ "$r" = OK ] || { echo "CLUSTER RESET of the 4th node: $r" >&2; exit 1; }
  for i in 0 1 2; do
    r=$(redis-cli -p "${PORTS[$i]}" cluster forget "$old")
    [ "$r" = OK ] || { echo "CLUSTER FORGET on node $i: $r" >&2; exit 1; }
  done
  join_fourth
}

# move <tool> <out|in> <writer prefix or "">: sets RES[<tool>,<key>] to "<seconds>|<tally>".
# (No command substitution around a move: the tools keep counters in this shell.)
move() { # <tool> <out|in> <result key> <writer prefix or "">
  local t0 t1
  WRITER_TALLY=
  [ "$2" = out ] && ready_fourth
  [ -n "$4" ] && writer_start "$4"
  t0=$(now)
  "${1}_$2"
  t1=$(now)
  [ -n "$4" ] && writer_stop "$4"
  if [ "$2" = out ]; then check_move "$1" 4096; else check_move "$1" 0; fi
  RES[$1,$3]="$(echo "$t1 - $t0" | bc -l)|$WRITER_TALLY"
}

# redis-cli: rebalance onto the empty master, then weight 0 on it to empty it again.
cli_out() {
  redis-cli --cluster rebalance "127.0.0.1:${PORTS[0]}" --cluster-use-empty-masters \
    >"$WORK/rebalance.log" 2>&1 || true
  grep -q "Moving" "$WORK/rebalance.log" && ! grep -q "\*\*\*" "$WORK/rebalance.log" \
    || { cat "$WORK/rebalance.log" >&2; exit 1; }
}
cli_in() {
  redis-cli --cluster rebalance "127.0.0.1:${PORTS[0]}" \
    --cluster-weight "$(redis-cli -p "${PORTS[3]}" cluster myid)=0" >"$WORK/rebalance.log" 2>&1 || true
  grep -q "Moving" "$WORK/rebalance.log" && ! grep -q "\*\*\*" "$WORK/rebalance.log" \
    || { cat "$WORK/rebalance.log" >&2; exit 1; }
}

# tessera-operator converge: 4 shards, then 3 (the 4th group is drained).
ATOMIC=0
engine_converge() {
  "$OP" converge ${ENGINE_ARGS:-} --shards "$1" --replicas 0 "${PORTS[@]/#/127.0.0.1:}" \
    >"$WORK/converge.log" 2>&1 || { cat "$WORK/converge.log" >&2; exit 1; }
  ATOMIC=$((ATOMIC + $(grep -c "atomically" "$WORK/converge.log" || true)))
  [ -n "${DEBUG:-}" ] && cat "$WORK/converge.log" >&2
  return 0
}
engine_out() { engine_converge 4; }
engine_in() { engine_converge 3; }

# valkey: one MIGRATESLOTS per master to the 4th; back with one MIGRATESLOTS on the 4th naming
# the three masters. Done when the source's export jobs (its log keeps finished ones) report
# success.
wait_jobs() { # <port> <export jobs that must have succeeded>
  for _ in $(seq 60000); do
    local states
    states=$(redis-cli -p "$1" cluster getslotmigrations \
      | awk '/^operation$/ {getline; op=$0; next} /^state$/ {getline; if (op == "EXPORT") print}')
    grep -qE "failed|cancelled" <<<"$states" && { echo "valkey job: $states" >&2; exit 1; }
    [ "$(grep -c '^success$' <<<"$states")" -ge "$2" ] && return 0
    sleep 0.005
  done
  echo "valkey jobs did not finish" >&2
  exit 1
}
VK_MOVES=()
valkey_out() {
  local i a b id r
  mapfile -t VK_MOVES < <(migrateslots_args)
  for m in "${VK_MOVES[@]}"; do
    read -r i a b id <<<"$m"
    r=$(redis-cli -p "${PORTS[$i]}" cluster migrateslots slotsrange "$a" "$b" node "$id")
    [ "$r" = OK ] || { echo "valkey MIGRATESLOTS: $r" >&2; exit 1; }
  done
  for m in "${VK_MOVES[@]}"; do
    read -r i _ <<<"$m"
    wait_jobs "${PORTS[$i]}" "$VK_DONE_OUT"
  done
  VK_DONE_OUT=$((VK_DONE_OUT + 1))
}
valkey_in() {
  local args=() i a b id r
  for m in "${VK_MOVES[@]}"; do
    read -r i a b id <<<"$m"
    args+=(slotsrange "$a" "$b" node "$(redis-cli -p "${PORTS[$i]}" cluster myid)")
  done
  r=$(redis-cli -p "${PORTS[3]}" cluster migrateslots "${args[@]}")
  [ "$r" = OK ] || { echo "valkey MIGRATESLOTS: $r" >&2; exit 1; }
  VK_DONE_IN=$((VK_DONE_IN + 3))
  wait_jobs "${PORTS[3]}" "$VK_DONE_IN"
}
VK_DONE_OUT=1
VK_DONE_IN=0

# run_tool <tool> <server binary>: the four moves on one fresh cluster.
declare -A RES
run_tool() {
  start_nodes "$1" "$2"
  EXPECT_KEYS=$KEYS
  [ "$(total_keys)" -eq "$KEYS" ] || { echo "load failed: $(total_keys) keys" >&2; exit 1; }
  join_fourth
  move "$1" out out ""
  move "$1" in in ""
  move "$1" out wout w1
  move "$1" in win w2
  stop_nodes
}

TOOLS=${TOOLS:-"cli engine valkey"}
for t in $TOOLS; do
  case $t in
    cli) run_tool cli "$REDIS" ;;
    engine) run_tool engine "$TESSERA" ;;
    valkey) run_tool valkey "$VALKEY" ;;
  esac
done
[ "$TOOLS" = "cli engine valkey" ] || { declare -p RES; exit 0; }

secs() { echo "${RES[$1,$2]%%|*}"; }
tally() { echo "${RES[$1,$2]#*|}"; }
ver() { "$1" --version | awk '{print $3}' | cut -d= -f2; }
printf 'bench-reshard: %d keys × 100 B, 4096 slots moved each way (3→4 and 4→3 masters)\n' "$KEYS"
printf '  %-48s %8s %8s %8s %8s\n' "seconds" "3→4" "4→3" "3→4+w" "4→3+w"
for t in cli engine valkey; do
  case $t in
    cli) name="redis-cli --cluster rebalance (redis-server $(ver "$REDIS"))" ;;
    engine) name="tessera-operator converge (tessera-node)" ;;
    valkey) name="valkey-server MIGRATESLOTS ($(ver "$VALKEY"))" ;;
  esac
  printf '  %-48s %8.2f %8.2f %8.2f %8.2f\n' "$name" "$(secs $t out)" "$(secs $t in)" \
    "$(secs $t wout)" "$(secs $t win)"
done
for m in out in wout win; do
  printf '  ratio to tessera, %-5s redis-cli %6.2fx  valkey %6.2fx\n' "$m:" \
    "$(echo "$(secs cli $m) / $(secs engine $m)" | bc -l)" \
    "$(echo "$(secs valkey $m) / $(secs engine $m)" | bc -l)"
done
printf '  tessera-operator converge ran %d atomic jobs\n' "$ATOMIC"
printf 'writer (%d SETs/s through a cluster client) during each move:\n' "$WRITER_RATE"
for t in cli engine valkey; do
  for m in wout win; do
    printf '  %-7s %-5s %s\n' "$t" "$m" "$(tally $t $m)"
  done
done
