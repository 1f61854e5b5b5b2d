# Sourced by the bench-*.sh scripts that start servers on loopback: a temp dir ($TMP) removed
# at exit with every server started, `free_port` and `start`. Set BENCH_NAME first (the temp
# dir's prefix).
TMP=$(mktemp -d "${TMPDIR:-/tmp}/${BENCH_NAME:-bench}.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { # first free port from $1 upward (our range 11000-12999)
    local p=$1
    while (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; do p=$((p + 1)); done
    echo "$p"
}

# BENCH_TESSERA_ARGS: directives added to every tessera-node (the binary $TESSERA_BIN) the
# scripts start, e.g. "--busy-poll-usec 0"; the reports name them.
start() { # name binary port [directives...] -> sets PID_<name>
    local name=$1 bin=$2 port=$3; shift 3
    local -a extra=()
    if [ "$bin" = "${TESSERA_BIN:-}" ] && [ -n "${BENCH_TESSERA_ARGS:-}" ]; then
        read -ra extra <<<"$BENCH_TESSERA_ARGS"
    fi
    mkdir -p "$TMP/$name"
    (cd "$TMP/$name" && exec "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --protected-mode no "$@" "${extra[@]}" >"$TMP/$name.log" 2>&1) &
    PIDS+=($!)
    eval "PID_$name=$!"
    for _ in $(seq 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "$name did not start" >&2; cat "$TMP/$name.log" >&2; exit 1
}

tessera_args_note() { # the report's line on BENCH_TESSERA_ARGS
    echo "tessera-node ran with the defaults of its directives${BENCH_TESSERA_ARGS:+ and $BENCH_TESSERA_ARGS}."
}
