#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 60) and fails on any crash.
#
# Usage: scripts/fuzz.sh [SECONDS]
#
# The targets run side by side, as many at a time as there are CPUs (FUZZ_JOBS overrides it):
# each fuzzer is one process on one CPU, so every target still gets its SECONDS of a CPU while
# the whole run takes a fraction of the time. Each target's output is printed when it ends.
#
# Needs a nightly toolchain (`cargo +nightly`); without one it says so and exits 0, because the
# stable replay test (tests/fuzz_replay.rs) already guards the corpus and the regressions.
# Installs cargo-fuzz when it is missing. New inputs go to fuzz/work/<target> (ignored by git);
# the committed seeds in fuzz/corpus/<target> are read, never written. A crash leaves its input
# in fuzz/artifacts/<target>/: minimise it (`cargo +nightly fuzz tmin <target> <file>`), fix the
# bug, and commit the minimised input there as a regression case.
#
# The targets' handlers panic on purpose (method `panic`, tool `panic`) to check that the loop
# answers and goes on; the loop reports each such panic on stderr. Those lines, and only those,
# are prefixed with "expected:" (and counted past the third); any other panic or crash report
# passes through unchanged.
set -euo pipefail

seconds="${1:-60}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: no nightly toolchain (cargo +nightly); skipping the fuzz run" >&2
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi

# target:max_len. Inputs stay small so that each run is fast; the properties do not need more
# (framing's line limit is at most 255 bytes, the loops' is 512).
targets=(framing:4096 message:4096 server_loop:4096 server_loop_mcp:4096 server_session:4096 client_session:4096 client_responses:4096)

# Labels the loop's reports of the targets' deliberate panics (fuzz/properties.rs) as expected.
# A run makes hundreds: the first three are shown, the rest counted in one line at the end.
label_expected_panics() {
  awk '
    /^mcpipe: the (handler panicked on .*|tool .* panicked): the fuzz (handler|tool) panics on purpose at / {
      if (++expected <= 3) {
        print "expected: a deliberate panic of the fuzz target, answered as an error: " $0
        fflush()
      }
      next
    }
    { print; fflush() }
    END {
      if (expected > 3) {
        print "expected: " expected - 3 " more deliberate panics of the fuzz target, not shown"
      }
    }
  '
}

# Fuzzes one target ($1, inputs up to $2 bytes) for $seconds; its output goes to stdout.
fuzz_one() {
  local target="$1" max_len="$2"
  local dict=()
  if [[ "$target" != framing ]]; then
    dict=(-dict=fuzz/jsonrpc.dict)
  fi
  mkdir -p "fuzz/work/$target"
  echo "fuzz.sh: $target for ${seconds}s"
  # -timeout: one input taking this long is a hang, reported as a crash.
  # -rss_limit_mb: a run growing past this is reported as a crash (memory must stay bounded).
  # With pipefail the pipeline fails when the fuzzer does (awk itself always succeeds).
  if ! cargo +nightly fuzz run "$target" "fuzz/work/$target" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 ${dict[@]+"${dict[@]}"} 2>&1 | label_expected_panics; then
    echo "fuzz.sh: $target FAILED; the input is in fuzz/artifacts/$target/"
    return 1
  fi
}

jobs="${FUZZ_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}"
case "$jobs" in
  '' | *[!0-9]* | 0) jobs=1 ;;
esac
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

cargo +nightly fuzz build
# Every target runs for the same time, so dealing them out in turn keeps the lanes even: lane k
# runs targets k, k + jobs, k + 2 * jobs, ... one after another. (Plain `wait PID`, so that the
# script also runs on the bash 3.2 of macOS.)
lanes=()
for ((lane = 0; lane < jobs && lane < ${#targets[@]}; lane++)); do
  (
    for ((i = lane; i < ${#targets[@]}; i += jobs)); do
      target="${targets[$i]%%:*}"
      if ! fuzz_one "$target" "${targets[$i]##*:}" >"$logs/$target.log" 2>&1; then
        touch "$logs/$target.failed"
      fi
    done
  ) &
  lanes+=("$!")
done
for pid in "${lanes[@]}"; do
  wait "$pid" || true
done
status=0
for entry in "${targets[@]}"; do
  target="${entry%%:*}"
  cat "$logs/$target.log" >&2 2>/dev/null || echo "fuzz.sh: $target did not run" >&2
  if [[ -e "$logs/$target.failed" || ! -e "$logs/$target.log" ]]; then
    status=1
  fi
done
exit "$status"
