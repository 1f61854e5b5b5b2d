#!/usr/bin/env bash
# `make image`: builds the `node` and `operator` targets of the Dockerfile with docker or
# podman (whichever exists; override with ENGINE=...). Tags follow the workspace version.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
engine="${ENGINE:-}"
if [ -z "$engine" ]; then
  for e in docker podman; do
    if command -v "$e" >/dev/null 2>&1; then engine=$e; break; fi
  done
fi
if [ -z "$engine" ]; then
  echo "image: no container engine found (install docker or podman, or set ENGINE=...)." >&2
  echo "image: nothing was built; the Dockerfile's targets are 'node' and 'operator'." >&2
  exit 1
fi
if ! "$engine" info >/dev/null 2>&1; then
  echo "image: '$engine' is installed but cannot reach its daemon/service ('$engine info' fails);" >&2
  echo "image: start it (or set ENGINE=podman) and retry. Nothing was built." >&2
  exit 1
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
registry="${REGISTRY:-tessera}"
for target in node operator; do
  tag="$registry/tessera-$target:$version"
  echo "image: $engine build --target $target -t $tag ."
  "$engine" build --target "$target" -t "$tag" .
done
echo "image: built $registry/tessera-node:$version and $registry/tessera-operator:$version"
