#!/usr/bin/env bash
# bench-failover (issue 21): how long a shard cannot take writes after its master dies, and how
# long forming a 3x1 cluster from empty nodes takes, for tessera-node, redis-server 7.0 and
# valkey-server 9.1 in one run.
#
# Failover: six nodes on loopback formed by `redis-cli --cluster create --cluster-replicas 1`,
# a few writes so the replicas hold an offset, then SIGKILL of the master of slot 0 and the
# time until a SET to that slot succeeds on its new owner (asked of a surviving node every
# 5 ms, as a cluster client refreshing its slot map would). RUNS fresh clusters per server
# and node timeout; prints every run and the median.
#
# Forming: six empty nodes to a 3x1 cluster whose every node reports cluster_state:ok and
# sees three masters with slots and three replicas: `tessera-operator converge` (tessera-node) against
# `redis-cli --cluster create` (on the same server binary).
#
#   RUNS=5 TIMEOUTS="2000 5000" KINDS="tessera redis valkey" PARTS="failover form" \
#     bash scripts/bench-failover.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
PARTS=${PARTS:-"failover form"}
TIMEOUTS=${TIMEOUTS:-"2000 5000"}
KINDS=${KINDS:-"tessera redis valkey"}
BASE_PORT=${BASE_PORT:-23100}
TESSERA=target/release/tessera-node
OP=target/release/tessera-operator
VALKEY=${VALKEY:-.tools/bin/valkey-server}
REDIS=${REDIS:-/usr/bin/redis-server}
WORK=$(mktemp -d /tmp/bench-failover.XXXXXX)
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The RESP client both Python steps use (python3 has no Redis client in the standard library).
cat >"$WORK/resp.py" <<'EOF'
import socket

class RespError(Exception):
    pass

def parse(b):
    """One reply from the front of b: (value, rest); ValueError when b holds less."""
    t, line_end = b[:1], b.index(b"\r\n")
    head, rest = b[1:line_end], b[line_end + 2:]
    if t == b"+" or t == b":":
        return head, rest
    if t == b"-":
        return RespError(head.decode(errors="replace")), rest
    if t == b"$":
        n = int(head)
        if n < 0:
            return None, rest
        if len(rest) < n + 2:
            raise ValueError("short bulk")
        return rest[:n], rest[n + 2:]
    if t == b"*":
        out = []
        for _ in range(int(head)):
            v, rest = parse(rest)
            out.append(v)
        return out, rest
    raise ValueError("unknown reply type")

def cmd(port, *args, timeout=2.0):
    """Sends one command on a new connection; returns its parsed reply (an error reply as a
    RespError value)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"*%d\r\n" % len(args)
                  + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args)))
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise OSError("closed")
            data += chunk
            try:
                return parse(data)[0]
            except (ValueError, IndexError):
                continue
    finally:
        s.close()

def text(port, *args):
    """A bulk or status reply as str ("" for anything else)."""
    v = cmd(port, *args)
    return v.decode(errors="replace") if isinstance(v, bytes) else ""
EOF

[ -x "$TESSERA" ] && [ -x "$OP" ] || cargo build --release -q -p tessera-node -p tessera-operator
command -v redis-cli >/dev/null || { echo "redis-cli missing: run make deps" >&2; exit 1; }
for k in $KINDS; do
  case $k in
    redis) [ -x "$REDIS" ] || { echo "redis-server missing at $REDIS: run make deps" >&2; exit 1; } ;;
    valkey) [ -x "$VALKEY" ] || { echo "valkey-server missing at $VALKEY: run make deps" >&2; exit 1; } ;;
  esac
done

server_of() {
  case $1 in
    tessera) echo "$TESSERA" ;;
    redis) echo "$REDIS" ;;
    valkey) echo "$VALKEY" ;;
  esac
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Six free ports (with their bus ports) from BASE_PORT on.
pick_ports() {
  PORTS=()
  local p=$BASE_PORT
  while [ ${#PORTS[@]} -lt 6 ]; do
    if port_free "$p" && port_free $((p + 10000)); then PORTS+=("$p"); fi
    p=$((p + 1))
    [ "$p" -lt 23999 ] || { echo "no free ports" >&2; exit 1; }
  done
}

# start_nodes KIND NODE_TIMEOUT: six empty cluster nodes; their pids in NODE_PIDS.
start_nodes() {
  local bin
  bin=$(server_of "$1")
  pick_ports
  NODE_PIDS=()
  for p in "${PORTS[@]}"; do
    local d=$WORK/$1-$p
    rm -rf "$d" && mkdir -p "$d"
    "$bin" --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-node-timeout "$2" \
      --cluster-config-file nodes.conf --dir "$d" --save "" --appendonly no \
      --logfile "$d/log" >/dev/null 2>&1 &
    NODE_PIDS+=($!)
    PIDS+=($!)
  done
  for p in "${PORTS[@]}"; do
    for _ in $(seq 200); do
      redis-cli -p "$p" ping 2>/dev/null | grep -q PONG && break
      sleep 0.05
    done
  done
}

stop_nodes() {
  for p in "${NODE_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${NODE_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}

# Waits until every node has cluster_state:ok and sees the 3x1 layout; prints when (epoch s).
# With `sync`, also until the three replicas' links are up.
wait_formed() {
  python3 - "$WORK" "${1:-}" "${PORTS[@]}" <<'EOF'
import sys, time
sys.path.insert(0, sys.argv[1])
from resp import text
sync = sys.argv[2] == "sync"
ports = [int(p) for p in sys.argv[3:]]
deadline = time.time() + 90
while time.time() < deadline:
    try:
        # Every node ok and every node's view: three masters with slots, three replicas.
        # (Not the replicas' sync: its timing is repl-diskless-sync-delay's, 5 s by default.)
        ok = True
        for p in ports:
            if "cluster_state:ok" not in text(p, "CLUSTER", "INFO"):
                ok = False; break
            lines = [l.split() for l in text(p, "CLUSTER", "NODES").splitlines() if len(l.split()) >= 8]
            replicas = sum("slave" in l[2] and l[3] != "-" for l in lines)
            masters = sum("master" in l[2] and len(l) > 8 for l in lines)
            if replicas != 3 or masters != 3:
                ok = False; break
        if ok and sync:
            ok = sum("master_link_status:up" in text(p, "INFO", "replication") for p in ports) == 3
        if ok:
            print("%.3f" % time.time())
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.005)
sys.exit("the cluster did not form within 90 s")
EOF
}

# failover_once KIND NODE_TIMEOUT: prints the seconds from SIGKILL to the first good write.
failover_once() {
  start_nodes "$1" "$2"
  local args=()
  for p in "${PORTS[@]}"; do args+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${args[@]}" --cluster-replicas 1 --cluster-yes >"$WORK/create.log" 2>&1 \
    || { cat "$WORK/create.log" >&2; exit 1; }
  wait_formed sync >/dev/null
  local pid_by_port=""
  for i in "${!PORTS[@]}"; do pid_by_port+="${PORTS[$i]}:${NODE_PIDS[$i]} "; done
  python3 - "$WORK" "$pid_by_port" "${PORTS[@]}" <<'EOF'
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from resp import cmd
pids = dict(x.split(":") for x in sys.argv[2].split())
ports = [int(p) for p in sys.argv[3:]]
def owner_of_slot0(port):
    slots = cmd(port, "CLUSTER", "SLOTS", timeout=0.5)
    for r in slots:
        if int(r[0]) <= 0 <= int(r[1]):
            return int(r[2][1])
    return None
key = "{06S}"  # hash slot 0
master = owner_of_slot0(ports[0])
for i in range(200):
    cmd(master, "SET", key, str(i))
time.sleep(1.0)
os.kill(int(pids[str(master)]), signal.SIGKILL)
t0 = time.monotonic()
survivors = [p for p in ports if p != master]
while time.monotonic() - t0 < 120:
    for p in survivors:
        try:
            owner = owner_of_slot0(p)
            if owner and owner != master and cmd(owner, "SET", key, "after", timeout=0.5) == b"OK":
                print("%.3f" % (time.monotonic() - t0))
                sys.exit(0)
            break
        except OSError:
            continue
    time.sleep(0.005)
sys.exit("no failover within 120 s")
EOF
  stop_nodes
}

# form_once KIND MODE: seconds to form 3x1 from empty nodes (MODE converge | create).
form_once() {
  start_nodes "$1" 15000
  # A master reports cluster_state:ok no sooner than 2 s after its start (Redis's
  # CLUSTER_WRITABLE_DELAY, kept by every server here): nodes forming in Kubernetes have
  # been up far longer, so the clock starts after it.
  sleep 2.2
  local args=() start end waiter
  for p in "${PORTS[@]}"; do args+=("127.0.0.1:$p"); done
  # The waiter polls from before the start, so its own start-up is not timed.
  wait_formed >"$WORK/formed" &
  waiter=$!
  sleep 0.3
  start=$(date +%s.%N)
  if [ "$2" = converge ]; then
    "$OP" converge --shards 3 --replicas 1 "${args[@]}" >"$WORK/converge.log" 2>&1 \
      || { cat "$WORK/converge.log" >&2; exit 1; }
  else
    redis-cli --cluster create "${args[@]}" --cluster-replicas 1 --cluster-yes >"$WORK/create.log" 2>&1 \
      || { cat "$WORK/create.log" >&2; exit 1; }
  fi
  wait "$waiter" || exit 1
  end=$(cat "$WORK/formed")
  stop_nodes
  python3 -c "print('%.3f' % ($end - $start))"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

if [[ " $PARTS " == *" failover "* ]]; then
echo "failover after SIGKILL of a master (3x1, seconds to the first good write to its slots)"
for nt in $TIMEOUTS; do
  for k in $KINDS; do
    runs=""
    for _ in $(seq "$RUNS"); do runs+="$(failover_once "$k" "$nt") "; done
    printf '  %-8s node-timeout %5s ms: median %s s  (runs: %s)\n' "$k" "$nt" "$(echo "$runs" | median)" "$runs"
  done
done
fi

[[ " $PARTS " == *" form "* ]] || exit 0
echo "forming 3x1 from six empty nodes (seconds until every node is ok and sees 3 masters, 3 replicas)"
for k in $KINDS; do
  modes="create"
  [ "$k" = tessera ] && modes="converge create"
  for m in $modes; do
    runs=""
    for _ in $(seq "$RUNS"); do runs+="$(form_once "$k" "$m") "; done
    printf '  %-8s %-9s median %s s  (runs: %s)\n' "$k" "$m" "$(echo "$runs" | median)" "$runs"
  done
done
