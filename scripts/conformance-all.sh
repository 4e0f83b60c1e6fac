#!/usr/bin/env bash
# Runs the official MCP conformance suite against `mcpipe demo --conformance` (behind
# supergateway on 127.0.0.1, see scripts/conformance.sh) for both protocol eras:
#
#   2025-11-25  stable suite 0.1.16,        --suite active --spec-version 2025-11-25
#   2026-07-28  alpha suite 0.2.0-alpha.12, --requirements 2026-07-28
#
# each against its baseline, interop/conformance-baseline-<revision>.yml, which lists only the
# failures the stdio<->HTTP bridge causes (one line of reason each); then
#
#   2026-07-28-tasks  alpha suite 0.2.0-alpha.12, each tasks-* scenario by name (TASK_SCENARIOS)
#
# through interop/one_process_bridge.mjs (conformance.sh --one-process), because a task lives
# in the process that made it and supergateway starts a process per 2026-07-28 request. These
# must all pass, with no baseline; a scenario the suite itself skips entirely (every check
# SKIPPED, today tasks-status-notifications) is reported as `skipped-by-suite`.
#
#   scripts/conformance-all.sh [--mcpipe PATH] [--output-dir DIR] [--only REVISION]
#
#   --mcpipe PATH     the mcpipe binary (default: target/debug/mcpipe; build it first)
#   --output-dir DIR  where results go (default interop/conformance-results/all-<time>);
#                     each revision gets a subfolder with checks.json files, the bridge's log
#                     and the suite's own output (suite.log)
#   --only REVISION   run one revision (2025-11-25, 2026-07-28 or 2026-07-28-tasks)
#
# Output: per revision one line per scenario (`pass`, `FAIL`, `expected-fail`, `not-scored`),
# then `conformance <revision>: ...` and a last line `conformance: PASS|FAIL ...`. The suite's
# own output, whose closing "Total: N passed, M failed" counts checks and is not a test count,
# stays in suite.log. Exit status 0 only when both revisions pass against their baselines.
#
# Bounded: each suite run has a 150 s bound (conformance.sh adds ~30 s for the bridge); the
# whole script normally takes well under a minute. conformance.sh stops every process it
# started (bridge, stdio children, suite) on exit, failure, Ctrl-C or SIGTERM; this script
# forwards INT/TERM to the run in progress and waits for its cleanup.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INTEROP="$ROOT/interop"
mcpipe="$ROOT/target/debug/mcpipe"
out_dir=""
only=""
SUITE_BOUND=150
# Each task scenario takes a few seconds; the bound is per scenario.
TASK_BOUND=60
TASK_SCENARIOS=(
  tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal
  tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications
  tasks-required-task-error tasks-mrtr-composition
)

die() { echo "conformance-all: error: $*" >&2; exit 2; }

while (($#)); do
  case "$1" in
    --mcpipe) mcpipe="${2:?}"; shift 2 ;;
    --output-dir) out_dir="${2:?}"; shift 2 ;;
    --only) only="${2:?}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ -x "$mcpipe" ]] || die "$mcpipe is not an executable; run cargo build first (or pass --mcpipe)"
command -v python3 >/dev/null || die "python3 is needed to read the results"
case "$only" in ""|2025-11-25|2026-07-28|2026-07-28-tasks) ;;
  *) die "--only wants 2025-11-25, 2026-07-28 or 2026-07-28-tasks" ;; esac
if [[ -z "$out_dir" ]]; then out_dir="$INTEROP/conformance-results/all-$(date -u +%Y%m%dT%H%M%SZ)"; fi
mkdir -p "$out_dir"

child=""
# shellcheck disable=SC2317  # reached through the traps
forward() {
  if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  exit "$1"
}
trap 'forward 130' INT
trap 'forward 143' TERM
trap 'forward 129' HUP

# Reads one run's suite output and baseline; prints the per-scenario lines and the summary
# line; exits 0 when the run passed against its baseline.
report() {
  python3 - "$@" <<'EOF'
import re, sys
revision, log_path, baseline_path, status = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
requirements_path = sys.argv[5] if len(sys.argv) > 5 else ""
text = re.sub(r"\x1b\[[0-9;]*m", "", open(log_path, encoding="utf-8", errors="replace").read())
summary = text.split("=== SUMMARY ===", 1)[1] if "=== SUMMARY ===" in text else ""
results = {}
for m in re.finditer(r"^([✓✗]) (\S+): \d+ passed, \d+ failed$", summary, re.M):
    results[m.group(2)] = m.group(1) == "✓"
# Scenarios the revision's requirement set runs but does not score (the suite prints them only
# when no baseline is given, so read the set itself): `- scenario: X` entries with `leg: server`.
not_scored = set()
if requirements_path:
    current = None
    for line in open(requirements_path, encoding="utf-8"):
        m = re.match(r"^\s*-\s*scenario:\s*(\S+)", line)
        if m:
            current = m.group(1)
        elif current and re.match(r"^\s*leg:\s*server\s*$", line):
            not_scored.add(current)
baseline = []
for line in open(baseline_path, encoding="utf-8"):
    m = re.match(r"^\s*-\s*(\S+)\s*$", line)
    if m:
        baseline.append(m.group(1))
whole = {b for b in baseline if ":" not in b}
partly = {b.split(":", 1)[0] for b in baseline if ":" in b}
unexpected = re.findall(r"^\s+✗ (\S+)$", text.split("Unexpected failures (not in baseline):", 1)[1], re.M) \
    if "Unexpected failures (not in baseline):" in text else []
stale = re.findall(r"^\s+✓ (\S+)$", text.split("Stale baseline entries", 1)[1], re.M) \
    if "Stale baseline entries" in text else []
scored = [s for s in results if s not in not_scored]
passed = 0
for name, ok in results.items():
    if name in not_scored:
        word = "not-scored, " + ("passes" if ok else "fails")
    elif name in unexpected:
        word = "FAIL" if not ok else "FAIL (warnings not in the baseline)"
    elif not ok:
        word = "expected-fail (baseline)"
    else:
        passed += 1
        word = "pass (baseline warnings)" if name in partly else "pass"
    print(f"  {revision}  {word:<36} {name}")
good = status == 0 and bool(results) and not unexpected and not stale
problems = []
if not results:
    problems.append("no scenario results (see suite.log)")
if unexpected:
    problems.append("unexpected failures: " + ", ".join(unexpected))
if stale:
    problems.append("stale baseline entries: " + ", ".join(stale))
if status not in (0, 1):
    problems.append(f"suite exit status {status}")
if status == 1 and not unexpected and not stale and results:
    problems.append("suite exit status 1")
ran_not_scored = [s for s in results if s in not_scored]
print(f"conformance {revision}: {'ok' if good else 'NOT OK'}: {passed} of {len(scored)} scored scenarios "
      f"pass; baseline entries {len(baseline)}; not-scored scenarios run {len(ran_not_scored)} "
      f"({sum(1 for s in ran_not_scored if results[s])} pass)"
      + ("" if good else "; " + "; ".join(problems)))
sys.exit(0 if good else 1)
EOF
}

overall=0
summaries=()
run() {
  local revision="$1"; shift
  local dir="$out_dir/$revision"
  mkdir -p "$dir"
  local status=0
  "$ROOT/scripts/conformance.sh" "$@" --timeout "$SUITE_BOUND" \
    --expected-failures "$INTEROP/conformance-baseline-$revision.yml" --output-dir "$dir" \
    -- "$mcpipe" demo --conformance >"$dir/suite.log" 2>&1 &
  child=$!
  wait "$child" || status=$?
  child=""
  echo "conformance $revision: suite exit status $status (output: $dir/suite.log)" >&2
  local line
  local requirements=""
  if [[ "$revision" == 2026-07-28 ]]; then
    requirements="$INTEROP/node_modules/conformance-alpha/requirements/$revision.yaml"
  fi
  if line="$(report "$revision" "$dir/suite.log" "$INTEROP/conformance-baseline-$revision.yml" "$status" "$requirements")"; then
    :
  else
    overall=1
  fi
  printf '%s\n' "$line"
  local last
  last="$(printf '%s\n' "$line" | tail -n1)"
  summaries+=("${last#conformance }")
}

if [[ -z "$only" || "$only" == 2025-11-25 ]]; then
  run 2025-11-25 --suite active --spec-version 2025-11-25
fi
if [[ -z "$only" || "$only" == 2026-07-28 ]]; then
  run 2026-07-28 --alpha --requirements 2026-07-28
fi

# One scenario's verdict from its checks.json files: pass, skipped-by-suite (every check
# SKIPPED) or FAIL (any FAILURE or WARNING, or no checks at all).
task_verdict() {
  python3 - "$1" <<'EOF'
import glob, json, sys
checks = []
for path in glob.glob(sys.argv[1] + "/**/checks.json", recursive=True):
    checks += json.load(open(path, encoding="utf-8"))
statuses = [c.get("status") for c in checks]
bad = [c["id"] for c in checks if c.get("status") in ("FAILURE", "WARNING")]
if not checks or bad:
    print("FAIL" + (" (" + ", ".join(bad) + ")" if bad else " (no checks)"))
elif all(s == "SKIPPED" for s in statuses):
    print("skipped-by-suite")
else:
    print("pass")
EOF
}

run_tasks() {
  local revision=2026-07-28-tasks
  local passed=0 skipped=0 failed=()
  for scenario in "${TASK_SCENARIOS[@]}"; do
    local dir="$out_dir/$revision/$scenario"
    mkdir -p "$dir"
    local status=0
    "$ROOT/scripts/conformance.sh" --alpha --one-process --scenario "$scenario" \
      --timeout "$TASK_BOUND" --output-dir "$dir" \
      -- "$mcpipe" demo --conformance >"$dir/suite.log" 2>&1 &
    child=$!
    wait "$child" || status=$?
    child=""
    local word
    word="$(task_verdict "$dir")"
    if ((status != 0)) && [[ "$word" != FAIL* ]]; then word="FAIL (suite exit status $status)"; fi
    case "$word" in
      pass) passed=$((passed + 1)) ;;
      skipped-by-suite) skipped=$((skipped + 1)) ;;
      *) failed+=("$scenario") ;;
    esac
    printf '  %s  %-36s %s\n' "$revision" "$word" "$scenario"
  done
  local verdict=ok
  if ((${#failed[@]})); then verdict="NOT OK"; overall=1; fi
  local line="conformance $revision: $verdict: $passed of ${#TASK_SCENARIOS[@]} scenarios pass, $skipped skipped by the suite"
  if ((${#failed[@]})); then line+="; failed: ${failed[*]}"; fi
  printf '%s\n' "$line"
  summaries+=("${line#conformance }")
}

if [[ -z "$only" || "$only" == 2026-07-28-tasks ]]; then
  run_tasks
fi

verdict=PASS
((overall == 0)) || verdict=FAIL
joined="$(printf '%s | ' "${summaries[@]}")"
echo "conformance: $verdict (${joined% | }); results in $out_dir"
exit "$overall"
