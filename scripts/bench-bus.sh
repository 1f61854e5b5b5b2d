#!/usr/bin/env bash
# Cluster-bus benchmark (issue 3, item 9): a 30-node cluster on loopback, one run each of
# tessera-cluster nodes, redis-server 7.0 and valkey-server 9.1. Prints convergence time,
# bus messages/s per node and CPU per node at rest, side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES="${NODES:-30}"
REST="${REST_SECS:-10}"
NT="${NODE_TIMEOUT:-15000}"
cargo build --release -q -p tessera-cluster --example bench_bus
BIN=target/release/examples/bench_bus
for kind in tessera redis valkey; do
  if [ "$kind" = valkey ] && [ ! -x .tools/bin/valkey-server ]; then
    echo "valkey    skipped (no .tools/bin/valkey-server)"; continue
  fi
  "$BIN" --kind "$kind" --nodes "$NODES" --rest-secs "$REST" --node-timeout "$NT"
done
