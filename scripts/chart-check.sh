#!/usr/bin/env bash
# `make chart`: lint and render the operator chart with the pinned helm (.tools/bin/helm from
# scripts/install-deps.sh), then validate the rendered manifests against the Kubernetes API
# types offline (operator/tests/chart.rs: deserialize into k8s-openapi types, deny unknown
# fields) and check that the chart's CRD matches crds/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
helm="${HELM:-$root/.tools/bin/helm}"
[ -x "$helm" ] || helm=$(command -v helm || true)
[ -n "$helm" ] && [ -x "$helm" ] || { echo "chart-check: helm not found; run 'make deps'" >&2; exit 1; }
chart=charts/tessera-operator

if ! cmp -s crds/redisclusters.tessera.rs.yaml "$chart/crds/redisclusters.tessera.rs.yaml"; then
  echo "chart-check: $chart/crds/ differs from crds/ (copy crds/redisclusters.tessera.rs.yaml)" >&2
  exit 1
fi

"$helm" lint --strict "$chart"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$helm" template rel "$chart" --namespace ops --include-crds > "$out/default.yaml"
"$helm" template rel "$chart" --namespace ops \
  --set 'watchNamespaces={apps,cache}' --set leaderElection.enabled=false \
  --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true \
  --set metrics.dashboard.enabled=true --set logFormat=json > "$out/namespaced.yaml"
echo "chart-check: rendered $(grep -c '^kind:' "$out/default.yaml") + $(grep -c '^kind:' "$out/namespaced.yaml") documents"

# --workspace: the same feature set as `cargo test --workspace`, so nothing is rebuilt.
HELM="$helm" cargo test -q --workspace --test chart --test crd
echo "chart-check: ok"
