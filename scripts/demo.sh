#!/usr/bin/env bash
# The tessera demo: kube-in-a-box + the operator on this machine, a RedisCluster applied with
# kubectl, keys written and read with redis-cli -c, a scale-out to 4 shards, timings.
#   make demo        (after make release)   — or: bash scripts/demo.sh
#   make demo-down                          — or: bash scripts/demo.sh down
# With a terminal it stays up for exploring until Ctrl-C; without one (CI=true, or stdin not a
# TTY) it runs through, prints its summary, tears down and exits 0 only if every phase passed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${DEMO_DIR:-$ROOT/.demo}"
MANIFEST="${DEMO_MANIFEST:-$ROOT/examples/minimal.yaml}"
NAME="${DEMO_NAME:-demo}"
KEYS="${DEMO_KEYS:-1000}"
export PATH="$ROOT/.tools/bin:$PATH"

pick() { # first existing binary among $DEMO_BIN_DIR, target/release and target/debug
  for p in ${DEMO_BIN_DIR:+"$DEMO_BIN_DIR/$1"} "$ROOT/target/release/$1" "$ROOT/target/debug/$1"; do
    [ -x "$p" ] && { echo "$p"; return 0; }
  done
  return 1
}

stop_pid() { # SIGTERM a pid from a pidfile, wait, SIGKILL
  local f="$1" pid
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  stop_pid "$STATE/operator.pid"
  local kiab
  if kiab="$(pick kube-in-a-box)"; then
    "$kiab" down --state-dir "$STATE" >/dev/null 2>&1 || true
  fi
  stop_pid "$STATE/kiab.pid"
}

if [ "${1:-}" = "down" ]; then
  down
  echo "demo: stopped (state left in $STATE)"
  exit 0
fi

interactive=1
if [ "${CI:-}" = "true" ] || [ ! -t 0 ]; then interactive=0; fi

KIAB="$(pick kube-in-a-box)" || { echo "demo: kube-in-a-box is not built (run make release)" >&2; exit 1; }
OPERATOR="$(pick tessera-operator)" || { echo "demo: tessera-operator is not built (run make release)" >&2; exit 1; }
# The example's pods run the operator's default image tessera/tessera-node, which kube-in-a-box
# maps to the most recently built of target/{release,debug}/tessera-node.
pick tessera-node >/dev/null || { echo "demo: tessera-node is not built (run make release)" >&2; exit 1; }
NODE="$(ls -t "$ROOT"/target/{release,debug}/tessera-node 2>/dev/null | head -n 1)"
command -v kubectl >/dev/null || { echo "demo: kubectl missing (run make deps)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "demo: redis-cli missing (run make deps)" >&2; exit 1; }

down
rm -rf "$STATE"
mkdir -p "$STATE"
export KUBECONFIG="$STATE/kubeconfig"

on_signal() { echo; echo "demo: stopping..."; down; exit 130; }
trap on_signal INT TERM

declare -a PHASES=() TIMES=() RESULTS=()
failed=0
now() { date +%s.%N; }
phase() { # phase "title" command...
  local title="$1"; shift
  [ "$failed" = 1 ] && { PHASES+=("$title"); TIMES+=("-"); RESULTS+=("skipped"); return 1; }
  printf '\n== %s\n' "$title"
  local t0 t1 rc
  t0="$(now)"
  "$@"; rc=$?
  t1="$(now)"
  PHASES+=("$title"); TIMES+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f s", b-a}')")
  if [ $rc -eq 0 ]; then RESULTS+=("ok"); else RESULTS+=("FAILED"); failed=1; fi
  return $rc
}

wait_until() { # wait_until SECONDS description command...
  local secs="$1" what="$2"; shift 2
  local deadline=$(( $(date +%s) + secs ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    "$@" >/dev/null 2>&1 && return 0
    if [ -f "$STATE/operator.pid" ] && ! kill -0 "$(cat "$STATE/operator.pid")" 2>/dev/null; then
      echo "demo: the operator exited; last log lines:" >&2; tail -n 20 "$STATE/operator.log" >&2; return 1
    fi
    sleep 1
  done
  echo "demo: timed out after ${secs}s waiting for $what" >&2
  return 1
}

start_box() {
  "$KIAB" up --state-dir "$STATE" --detach --ip-base "${DEMO_IP_BASE:-127.0.1.1}"
}

start_operator() {
  setsid "$OPERATOR" run --metrics-addr 127.0.0.1:0 --log-format text >"$STATE/operator.log" 2>&1 </dev/null &
  echo $! >"$STATE/operator.pid"
  sleep 1
  kill -0 "$(cat "$STATE/operator.pid")" 2>/dev/null || { tail -n 20 "$STATE/operator.log" >&2; return 1; }
  echo "operator pid $(cat "$STATE/operator.pid"), log $STATE/operator.log"
  echo "node image tessera/tessera-node → $NODE (unless the manifest sets spec.image)"
}

rcl_ready() { # Ready, status for the current generation, and the wanted shard count
  local want="$1" out
  out="$(kubectl get rcl "$NAME" -o jsonpath='{.status.phase} {.status.observedGeneration} {.metadata.generation} {.status.shards} {.status.slotsAssigned}')" || return 1
  read -r ph og gen shards slots <<<"$out"
  [ "$ph" = "Ready" ] && [ "$og" = "$gen" ] && [ "$shards" = "$want" ] && [ "$slots" = "16384" ]
}

entry_ip() { kubectl get pod "$NAME-0-0" -o jsonpath='{.status.podIP}'; }

write_keys() {
  local ip; ip="$(entry_ip)" || return 1
  echo "writing $KEYS keys through $ip:6379 with redis-cli -c"
  for i in $(seq 1 "$KEYS"); do echo "SET demo:key:$i value-$i"; done \
    | redis-cli -c -h "$ip" -p 6379 >"$STATE/write.out" 2>&1 || return 1
  local ok; ok="$(grep -c '^OK$' "$STATE/write.out")"
  echo "$ok/$KEYS writes acknowledged"
  [ "$ok" = "$KEYS" ]
}

read_keys() {
  local ip; ip="$(entry_ip)" || return 1
  for i in $(seq 1 "$KEYS"); do echo "GET demo:key:$i"; done \
    | redis-cli -c -h "$ip" -p 6379 >"$STATE/read.out" 2>&1 || return 1
  local good; good="$(grep -c '^value-' "$STATE/read.out")"
  echo "$good/$KEYS keys read back"
  [ "$good" = "$KEYS" ]
}

show() {
  kubectl get rcl "$NAME" && kubectl get statefulsets,pods -o wide && \
    redis-cli -h "$(entry_ip)" -p 6379 cluster info | grep -E 'cluster_state|cluster_slots_assigned|cluster_known_nodes'
}

scale() { kubectl scale "rcl/$NAME" --replicas=4; }

phase "start kube-in-a-box" start_box
phase "start tessera-operator" start_operator
phase "kubectl apply -f ${MANIFEST#"$ROOT"/}" kubectl apply -f "$MANIFEST"
phase "wait for Ready (3 shards)" wait_until 300 "RedisCluster $NAME Ready" rcl_ready 3
phase "kubectl get rcl" show
phase "write keys (redis-cli -c)" write_keys
phase "read keys (redis-cli -c)" read_keys
phase "scale to 4 shards (kubectl scale)" scale
phase "wait until rebalanced (4 shards)" wait_until 600 "4 shards rebalanced" rcl_ready 4
phase "read keys after rebalance" read_keys
phase "kubectl get rcl" show

printf '\n== summary\n'
for i in "${!PHASES[@]}"; do
  printf '  %-40s %10s  %s\n' "${PHASES[$i]}" "${TIMES[$i]}" "${RESULTS[$i]}"
done

if [ "$failed" = 1 ]; then
  echo
  echo "demo: FAILED. Last operator log lines:"; tail -n 15 "$STATE/operator.log" 2>/dev/null
  echo "kube-in-a-box log: $STATE/kiab.log"
  down
  exit 1
fi

if [ "$interactive" = 0 ]; then
  down
  echo "demo: all phases passed (unattended run; everything stopped)"
  exit 0
fi

cat <<EOF

The cluster is yours to explore:
  export KUBECONFIG=$STATE/kubeconfig
  export PATH=$ROOT/.tools/bin:\$PATH
  kubectl get rcl,sts,pods -o wide
  kubectl describe rcl $NAME
  redis-cli -c -h $(entry_ip) -p 6379
  kubectl scale rcl/$NAME --replicas=5        # or: kubectl delete pod $NAME-0-0
Pod logs: $STATE/pods/<namespace>_<pod>_<uid>/logs/   operator log: $STATE/operator.log
Press Ctrl-C here (or run 'make demo-down' elsewhere) to stop everything.
EOF
while true; do
  kpid="$(cat "$STATE/kiab.pid" 2>/dev/null || true)"
  if [ -z "$kpid" ] || ! kill -0 "$kpid" 2>/dev/null; then
    echo "demo: kube-in-a-box stopped"; down; exit 0
  fi
  sleep 1
done
