#!/usr/bin/env bash
# Runs the MCP conformance suite's *client* scenarios against mcpipe's client: the suite starts
# an HTTP MCP server per scenario and runs
#   examples/conformance_client  NODE interop/http_stdio_bridge.mjs  URL
# so our stdio client talks to the suite's server through a Streamable-HTTP-to-stdio bridge.
#
#   scripts/conformance-client.sh [--client PATH] [--output-dir DIR]
#
#   --client PATH      the built example (default: cargo build --example conformance_client)
#   --output-dir DIR   where each scenario's checks.json goes (default
#                      interop/conformance-results/client-<time>)
#
# Runs, one scenario at a time (named below, no baseline):
# - the stable suite (0.1.16) at 2025-11-25,
# - the alpha suite (0.2.0-alpha.12) at 2025-11-25 and at 2026-07-28.
# A scenario passes when its checks hold no FAILURE or WARNING and the client exited 0.
# Every client scenario the suites list must be run here or named in NOT_RUN with its reason
# (a bridge makes it impossible, or it tests something mcpipe does not do): a scenario a new
# suite version adds fails the run until it is placed.
#
# Prints one line per scenario and a last line `conformance-client: PASS|FAIL (...)`; exits 0
# only on PASS. Each scenario is bounded (SCENARIO_BOUND s, then SIGKILL 10 s later).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INTEROP="$ROOT/interop"
NODE22="$INTEROP/node_modules/node/bin/node"
BRIDGE="$INTEROP/http_stdio_bridge.mjs"
STABLE="$INTEROP/node_modules/@modelcontextprotocol/conformance/dist/index.js"
ALPHA="$INTEROP/node_modules/conformance-alpha/dist/index.js"
SCENARIO_BOUND=60
CLIENT_TIMEOUT_MS=30000

# suite  revision  scenario
RUN=(
  "stable 2025-11-25 initialize"
  "stable 2025-11-25 tools_call"
  "stable 2025-11-25 elicitation-sep1034-client-defaults"
  "alpha 2025-11-25 initialize"
  "alpha 2025-11-25 tools_call"
  "alpha 2025-11-25 elicitation-sep1034-client-defaults"
  "alpha 2025-11-25 json-schema-2020-12-preservation"
  "alpha 2026-07-28 tools_call"
  "alpha 2026-07-28 request-metadata"
  "alpha 2026-07-28 sep-2322-client-request-state"
  "alpha 2026-07-28 json-schema-2020-12-preservation"
  "alpha 2026-07-28 json-schema-ref-no-deref"
)

# Scenario (or prefix ending in /) and why it is not run. Kept in step with docs/revisions.md.
NOT_RUN=(
  "auth/|OAuth over HTTP: the suite's server demands a bearer token; stdio carries no authorization (the specification has stdio servers take credentials from the environment), so a stdio client has no OAuth flow to test, only a bridge would"
  "sse-retry|SSE reconnection (retry field, Last-Event-ID): behaviour of the HTTP transport's event stream, which our stdio client does not have; through a bridge it would test the bridge"
  "http-standard-headers|Mcp-Method / Mcp-Name HTTP headers (SEP-2243): set by the HTTP transport; the bridge sets them, so the scenario would test the bridge"
  "http-custom-headers|Mcp-Param HTTP headers mirrored from x-mcp-header tool parameters (SEP-2243): HTTP transport only; stdio has no headers"
  "http-invalid-tool-headers|rejecting tools whose x-mcp-header annotations are invalid (SEP-2243): a duty of an HTTP client that would mirror them into headers; a stdio client mirrors nothing"
  "sep-2640-|the skills extension (SEP-2640): host behaviour (when to fetch skill files, digest and size checks) of an extension mcpipe's client does not implement"
)

client=""
out_dir=""
while (($#)); do
  case "$1" in
    --client) client="${2:?}"; shift 2 ;;
    --output-dir) out_dir="${2:?}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "conformance-client: unknown argument $1" >&2; exit 2 ;;
  esac
done

for tool in "$NODE22" "$STABLE" "$ALPHA" "$BRIDGE"; do
  [[ -e "$tool" ]] || { echo "conformance-client: $tool is missing: run bash scripts/setup-interop.sh" >&2; exit 2; }
done
if [[ -z "$client" ]]; then
  (cd "$ROOT" && cargo build --quiet --example conformance_client)
  client="$ROOT/target/debug/examples/conformance_client"
fi
[[ -x "$client" ]] || { echo "conformance-client: $client is not an executable" >&2; exit 2; }
out_dir="${out_dir:-$INTEROP/conformance-results/client-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out_dir"

overall=0
problems=()

# Every client scenario each suite lists is either run or named in NOT_RUN.
placed() {
  local scenario="$1" entry prefix
  for entry in "${RUN[@]}"; do
    [[ "${entry##* }" == "$scenario" ]] && return 0
  done
  for entry in "${NOT_RUN[@]}"; do
    prefix="${entry%%|*}"
    if [[ "$prefix" == */ || "$prefix" == *- ]]; then
      [[ "$scenario" == "$prefix"* ]] && return 0
    else
      [[ "$scenario" == "$prefix" ]] && return 0
    fi
  done
  return 1
}
listed=0
for suite in "$STABLE" "$ALPHA"; do
  while read -r scenario; do
    listed=$((listed + 1))
    if ! placed "$scenario"; then
      problems+=("unplaced scenario $scenario")
      overall=1
    fi
  done < <("$NODE22" "$suite" list 2>&1 | sed -n '/^Client scenarios/,/^$/p' | sed -n 's/^  - \([^ ]*\).*/\1/p')
done
((listed > 0)) || { problems+=("the suites listed no client scenarios"); overall=1; }

# One scenario's verdict from its checks.json: pass, or FAIL with the checks that did not.
verdict() {
  python3 - "$1" <<'EOF'
import glob, json, sys
checks = []
for path in glob.glob(sys.argv[1] + "/**/checks.json", recursive=True):
    checks += json.load(open(path, encoding="utf-8"))
bad = [c["id"] for c in checks if c.get("status") in ("FAILURE", "WARNING")]
passed = sum(1 for c in checks if c.get("status") == "SUCCESS")
if not checks or bad or passed == 0:
    print("FAIL" + (" (" + ", ".join(bad) + ")" if bad else " (no passing check)"))
else:
    print(f"pass ({passed} checks)")
EOF
}

passed=0
for entry in "${RUN[@]}"; do
  read -r suite revision scenario <<<"$entry"
  script="$STABLE"; [[ "$suite" == alpha ]] && script="$ALPHA"
  dir="$out_dir/$suite-$revision/$scenario"
  mkdir -p "$dir"
  status=0
  timeout --kill-after=10 "$SCENARIO_BOUND" "$NODE22" "$script" client \
    --command "$client $NODE22 $BRIDGE" --scenario "$scenario" --spec-version "$revision" \
    --timeout "$CLIENT_TIMEOUT_MS" -o "$dir" >"$dir/suite.log" 2>&1 || status=$?
  word="$(verdict "$dir")"
  if ((status != 0)) && [[ "$word" != FAIL* ]]; then word="FAIL (suite exit status $status)"; fi
  case "$word" in
    pass*) passed=$((passed + 1)) ;;
    *) overall=1; problems+=("$suite $revision $scenario") ;;
  esac
  printf '  %-6s %s  %-42s %s\n' "$suite" "$revision" "$scenario" "$word"
done
for entry in "${NOT_RUN[@]}"; do
  printf '  not run: %s: %s\n' "${entry%%|*}" "${entry#*|}"
done

word=PASS
((overall == 0)) || word=FAIL
line="conformance-client: $word ($passed of ${#RUN[@]} scenario runs pass; $listed listed client scenarios all placed"
((overall == 0)) || line="conformance-client: $word ($passed of ${#RUN[@]} scenario runs pass; problems: ${problems[*]}"
echo "$line); results in $out_dir"
exit "$overall"
