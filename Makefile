# The verbs people type. Every target that needs outside programs installs them first through
# scripts/install-deps.sh (package registries only), so each works on a fresh Debian machine.
SHELL := /bin/bash
export PATH := $(CURDIR)/.tools/bin:$(PATH)
CARGO ?= cargo
DEPS_STAMP := .tools/.deps-ok

.PHONY: all deps build release test test-unit lint fmt crds chart demo demo-down image fuzz \
        bench bench-node bench-bus bench-persist bench-reshard bench-failover bench-workloads bench-metrics \
        bench-instructions clean conformance

all: build

$(DEPS_STAMP): scripts/install-deps.sh
	bash scripts/install-deps.sh
	@touch $@

deps: $(DEPS_STAMP)

build:
	$(CARGO) build --workspace --bins

release:
	$(CARGO) build --release --workspace --bins

## The README's test command: everything CI runs.
test: deps
	$(CARGO) build --workspace --bins
	$(CARGO) test --workspace --no-fail-fast
	@if [ -d charts/tessera-operator ]; then $(MAKE) --no-print-directory chart; fi

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## Regenerate the checked-in CRD from the Rust types.
crds:
	$(CARGO) run -q -p tessera-operator -- crd > crds/redisclusters.tessera.rs.yaml
	cp crds/redisclusters.tessera.rs.yaml charts/tessera-operator/crds/

## helm lint + template of the operator chart.
chart: deps
	bash scripts/chart-check.sh

## The product: kube-in-a-box + operator forming a cluster (see README).
demo: deps release
	bash scripts/demo.sh

demo-down:
	bash scripts/demo.sh down

image:
	bash scripts/image.sh

## Every fuzz target (or FUZZ_TARGETS="a b") for FUZZ_SECONDS each (default 60); see scripts/fuzz.sh.
fuzz:
	bash scripts/fuzz.sh $(FUZZ_TARGETS)

## Redis 7.0.15's own test suites against tessera-node and redis-server: REDIS_SRC=<dir> (see README).
conformance: deps
	bash scripts/conformance.sh

bench: bench-node bench-bus bench-persist bench-reshard bench-failover

## tessera-node vs redis-server and valkey-server (bench-node.sh: throughput, capacity at -P 16,
## memory), then the workloads of issue 23 (bench-workloads.sh; BENCH_WORKLOADS=0 skips them).
bench-node: deps release
	bash scripts/bench-node.sh
	@if [ "$${BENCH_WORKLOADS:-1}" != 0 ]; then bash scripts/bench-workloads.sh; fi

## Many connections, big values, a Zipf GET/SET mix, 3-master clusters, BGSAVE and a replica's sync under load.
bench-workloads: deps release
	bash scripts/bench-workloads.sh

## User-space instructions per request under callgrind, tessera-node vs redis-server vs valkey-server:
## deterministic where CPU time on a VM is not, for judging a change to the node's own code.
bench-instructions: deps release
	bash scripts/bench-instructions.sh

bench-bus: deps release
	bash scripts/bench-bus.sh

bench-persist: deps release
	bash scripts/bench-persist.sh

bench-reshard: deps release
	bash scripts/bench-reshard.sh

## What serving /metrics costs: SET/GET -P16 with and without a scrape every second.
bench-metrics: deps release
	bash scripts/bench-metrics.sh

## Failover after SIGKILL of a master and forming 3x1, tessera-node vs redis-server vs valkey-server.
bench-failover: deps release
	bash scripts/bench-failover.sh

clean:
	$(CARGO) clean
	rm -rf .tools .demo bench/tmp
