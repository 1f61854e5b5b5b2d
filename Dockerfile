# syntax=docker/dockerfile:1
# Two images from one build context:
#   docker build --target node     -t tessera/tessera-node:0.1.0 .
#   docker build --target operator -t tessera/tessera-operator:0.1.0 .
# (`make image` builds both.) The build commands are the Makefile's, one package each.

ARG RUST_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS build-node
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=tessera-target-node \
    cargo build --release -p tessera-node \
 && install -D -m 0755 target/release/tessera-node /out/tessera-node

FROM ${RUST_IMAGE} AS build-operator
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=tessera-target-operator \
    cargo build --release -p tessera-operator \
 && install -D -m 0755 target/release/tessera-operator /out/tessera-operator

# The node: a Redis-compatible cluster node. Runs as uid 999 (the operator's pods set the same
# uid and fsGroup, so /data volumes are writable). No shell: the readiness probe is
# `tessera-node --ready-probe` (loading, replica link), the others are TCP.
FROM ${RUNTIME_IMAGE} AS node
COPY --from=build-node /out/tessera-node /usr/local/bin/tessera-node
USER 999:999
WORKDIR /data
EXPOSE 6379 16379
ENTRYPOINT ["tessera-node"]

# The operator: static rustls client, runs as the distroless nonroot user (65532).
FROM ${RUNTIME_IMAGE} AS operator
COPY --from=build-operator /out/tessera-operator /usr/local/bin/tessera-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["tessera-operator"]
CMD ["run"]
