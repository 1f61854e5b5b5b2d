#!/usr/bin/env bash
# Fuzzes tessera-node's parsers with cargo-fuzz (libFuzzer + AddressSanitizer) on the stable
# toolchain. The target bodies are in node/fuzz/src; `cargo test` replays their committed
# corpus (node/fuzz/corpus/<target>/) without libFuzzer.
#
#   scripts/fuzz.sh [target...]     every target when none is named (`make fuzz`)
#   FUZZ_SECONDS=60                 time per target (default 60)
#   FUZZ_BUILD_ONLY=1               build the instrumented targets, do not run them
#   FUZZ_TARGET_DIR=target/fuzz     where the instrumented build goes (never the main target
#                                   dir: the sanitizer flags would invalidate the normal build)
#
# New inputs libFuzzer finds go to $FUZZ_TARGET_DIR/corpus/<target> (not committed; copy the
# interesting ones into node/fuzz/corpus/<target>/). A crash makes the script exit 1 after
# the remaining targets ran, printing each reproducer's path and how to replay it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fuzz_dir=node/fuzz
seconds=${FUZZ_SECONDS:-60}
target_dir=${FUZZ_TARGET_DIR:-$root/target/fuzz}
case $target_dir in /*) ;; *) target_dir=$root/$target_dir ;; esac

# cargo-fuzz passes nightly flags (-Zsanitizer=address, sanitizer coverage); stable rustc
# ships the ASan runtime and takes them when told it may.
export RUSTC_BOOTSTRAP=1
# The release profile's thin LTO and debug info would double the build time for nothing
# here; line tables keep crash backtraces readable.
export CARGO_PROFILE_RELEASE_LTO=false
export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# Same flags for build and run, so `run` finds the build up to date.
flags=(--fuzz-dir "$fuzz_dir" --features libfuzzer --target-dir "$target_dir"
       --codegen-units 16)

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list --fuzz-dir "$fuzz_dir")
fi

start=$SECONDS
if [ $# -eq 0 ]; then
    cargo fuzz build "${flags[@]}"
else
    for t in "${targets[@]}"; do cargo fuzz build "${flags[@]}" "$t"; done
fi
echo "fuzz: instrumented build took $((SECONDS - start)) s"
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

# The binaries are run directly (not through `cargo fuzz run`, which would rebuild first if
# a source changed meanwhile). ASAN_OPTIONS as cargo-fuzz sets them.
bin_dir=$target_dir/x86_64-unknown-linux-gnu/release
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0}
failed=()
for t in "${targets[@]}"; do
    work=$target_dir/corpus/$t
    artifacts=$target_dir/artifacts/$t
    log=$target_dir/$t.log
    mkdir -p "$work" "$artifacts"
    echo "fuzz: $t for ${seconds} s"
    # The first corpus folder receives new inputs; the committed seeds are only read.
    if "$bin_dir/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 \
        "$work" "$fuzz_dir/corpus/$t" >"$log" 2>&1; then
        grep -E "stat::number_of_executed_units|stat::new_units_added" "$log" \
            | sed "s/^/fuzz: $t /" || true
    else
        tail -n 60 "$log" >&2
        repro=$(ls -t "$artifacts" 2>/dev/null | head -n 1)
        echo "fuzz: $t FAILED; reproducer: $artifacts/$repro" >&2
        if [ -n "$repro" ] && [ "$(stat -c %s "$artifacts/$repro")" -le 65536 ]; then
            # CI machines are thrown away: the bytes themselves, to rebuild the file.
            echo "fuzz: reproducer bytes (base64 -d to restore):" >&2
            base64 -w 100 "$artifacts/$repro" >&2
        fi
        echo "fuzz: replay with: $bin_dir/$t $artifacts/$repro" >&2
        echo "fuzz: then add it to $fuzz_dir/corpus/$t/ (cargo test replays it)" >&2
        failed+=("$t: $artifacts/$repro")
    fi
done
echo "fuzz: total $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
    printf 'fuzz: crash found by %s\n' "${failed[@]}" >&2
    exit 1
fi
