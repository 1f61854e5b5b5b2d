#!/usr/bin/env bash
# bench-reshard: time to go from 3 to 4 masters holding KEYS keys of 100 bytes, in one run:
#   1. redis-cli --cluster rebalance on redis-server 7.0 (key by key, MIGRATE);
#   2. `tessera-operator converge` on tessera-node (atomic slot migration, MIGRATESLOTS);
#   3. valkey-server 9.1's own CLUSTER MIGRATESLOTS, the same 4096 slots (1365-1366 from
#      each master), timed until every job reports success.
# The joining of the 4th node is the same for all and is not timed. Prints the times and
# the ratios to tessera.
#
#   KEYS=1000000 ENGINE_ARGS="--parallel 16" bash scripts/bench-reshard.sh
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
OP=target/release/tessera-operator
WORK=$(mktemp -d /tmp/bench-reshard.XXXXXX)
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

[ -x "$OP" ] || cargo build --release -q -p tessera-operator --bin tessera-operator

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

total_keys() {
  local t=0
  for port in "${PORTS[@]}"; do
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
  redis-cli --cluster add-node "127.0.0.1:${PORTS[3]}" "127.0.0.1:${PORTS[0]}" >/dev/null
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

# The 4th node's id, and each master's share for it: the last quarter of its slots.
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

# Run 1: redis-cli rebalance on redis-server.
start_nodes cli "$REDIS"
[ "$(total_keys)" -eq "$KEYS" ] || { echo "load failed: $(total_keys) keys" >&2; exit 1; }
join_fourth
t0=$(now)
redis-cli --cluster rebalance "127.0.0.1:${PORTS[0]}" --cluster-use-empty-masters >"$WORK/rebalance.log" 2>&1 || true
t1=$(now)
grep -q "Moving" "$WORK/rebalance.log" && ! grep -q "\*\*\*" "$WORK/rebalance.log" \
  || { cat "$WORK/rebalance.log"; exit 1; }
CLI=$(echo "$t1 - $t0" | bc -l)
[ "$(total_keys)" -eq "$KEYS" ] || { echo "redis-cli lost keys: $(total_keys)" >&2; exit 1; }
stop_nodes

# Run 2: tessera-operator converge on tessera-node (same data, same join).
start_nodes engine "$TESSERA"
[ "$(total_keys)" -eq "$KEYS" ] || { echo "load failed: $(total_keys) keys" >&2; exit 1; }
join_fourth
t0=$(now)
"$OP" converge ${ENGINE_ARGS:-} --shards 4 --replicas 0 "${PORTS[@]/#/127.0.0.1:}" >"$WORK/converge.log" 2>&1 || { cat "$WORK/converge.log"; exit 1; }
t1=$(now)
ENGINE=$(echo "$t1 - $t0" | bc -l)
[ "$(total_keys)" -eq "$KEYS" ] || { echo "engine lost keys: $(total_keys)" >&2; exit 1; }
grep -q "All 16384 slots covered" <<<"$(redis-cli --cluster check "127.0.0.1:${PORTS[0]}")" || { echo "check failed" >&2; exit 1; }
ATOMIC=$(grep -c "atomically" "$WORK/converge.log" || true)
[ -n "${DEBUG:-}" ] && cat "$WORK"/converge.log
stop_nodes

# Run 3: valkey-server's own MIGRATESLOTS, one job per master, all at once.
start_nodes valkey "$VALKEY"
[ "$(total_keys)" -eq "$KEYS" ] || { echo "load failed: $(total_keys) keys" >&2; exit 1; }
join_fourth
t0=$(now)
while read -r i a b id; do
  r=$(redis-cli -p "${PORTS[$i]}" cluster migrateslots slotsrange "$a" "$b" node "$id")
  [ "$r" = OK ] || { echo "valkey MIGRATESLOTS: $r" >&2; exit 1; }
done < <(migrateslots_args)
for i in 0 1 2; do
  for _ in $(seq 60000); do
    st=$(redis-cli -p "${PORTS[$i]}" cluster getslotmigrations | awk 'f {print; exit} /^state$/ {f=1}')
    case "$st" in success) break ;; failed|cancelled) echo "valkey job $st" >&2; exit 1 ;; esac
    sleep 0.005
  done
done
t1=$(now)
VK=$(echo "$t1 - $t0" | bc -l)
[ "$(total_keys)" -eq "$KEYS" ] || { echo "valkey lost keys: $(total_keys)" >&2; exit 1; }
stop_nodes

printf 'bench-reshard: 3→4 masters, %d keys × 100 B, 4096 slots moved\n' "$KEYS"
printf '  redis-cli --cluster rebalance (redis-server %s): %6.2f s\n' "$("$REDIS" --version | awk '{print $3}' | cut -d= -f2)" "$CLI"
printf '  tessera-operator converge (tessera-node, %s atomic jobs): %6.2f s\n' "$ATOMIC" "$ENGINE"
printf '  valkey-server MIGRATESLOTS (%s): %6.2f s\n' "$("$VALKEY" --version | awk '{print $3}' | cut -d= -f2)" "$VK"
printf '  ratio redis-cli / tessera: %6.2fx; valkey / tessera: %6.2fx\n' \
  "$(echo "$CLI / $ENGINE" | bc -l)" "$(echo "$VK / $ENGINE" | bc -l)"
