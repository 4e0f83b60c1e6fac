#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode) against a stdio MCP server, through
# supergateway as a stdio -> Streamable HTTP bridge on 127.0.0.1 only.
#
#   scripts/conformance.sh [options] -- SERVER_COMMAND [ARGS...]
#
#   scripts/conformance.sh -- ./target/debug/mcpipe demo --conformance
#   scripts/conformance.sh --scenario tools-list -- node interop/node_modules/.bin/mcp-server-everything stdio
#
# Options (all optional):
#   --suite S               active (default), all or pending
#   --scenario NAME         run one scenario instead of a suite
#   --spec-version V        e.g. 2025-11-25
#   --requirements REV      run exactly the scenarios revision REV requires (alpha suite only;
#                           replaces --suite and --spec-version), e.g. 2026-07-28
#   --alpha                 run the 0.2.0-alpha suite (interop/node_modules/conformance-alpha)
#                           instead of the stable 0.1.16
#   --expected-failures F   baseline YAML; the run then fails only on unexpected results
#   --timeout SECONDS       bound on the suite run (default 300); the whole script adds ~30 s
#   --port N                bridge port on 127.0.0.1 (default: a free one)
#   --output-dir DIR        where checks.json files go (default interop/conformance-results/<time>)
#   --verbose               pass --verbose to the suite
#   --one-process           use interop/one_process_bridge.mjs instead of supergateway: every
#                           MCP 2026-07-28 request goes to ONE long-lived stdio process (needed
#                           by the tasks-* scenarios; supergateway starts a process per request)
#
# The bridge runs `supergateway --stdio CMD --outputTransport streamableHttp --stateful`, which
# spawns one stdio child per MCP session (the suite opens a fresh session per scenario); the
# preload interop/loopback_only.cjs pins its listener to 127.0.0.1 (supergateway has no bind
# flag). The suite needs Node >= 22 (it imports fs.globSync), so it runs on the Node 22 from
# interop/node_modules/node; supergateway runs on the system node.
#
# Exit status: the suite's (0 only when no unexpected failure), 124 when the time bound hit,
# or non-zero with a message when the bridge could not start. Every process started here
# (the bridge, every stdio child it spawned in its own process group, the suite) is stopped
# on exit, including on failure or Ctrl-C.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INTEROP="$ROOT/interop"
NODE22="$INTEROP/node_modules/node/bin/node"
SUPERGATEWAY="$INTEROP/node_modules/supergateway/dist/index.js"
ONE_PROCESS_BRIDGE="$INTEROP/one_process_bridge.mjs"
CONFORMANCE="$INTEROP/node_modules/@modelcontextprotocol/conformance/dist/index.js"
CONFORMANCE_ALPHA="$INTEROP/node_modules/conformance-alpha/dist/index.js"

suite=active
scenario=""
spec_version=""
requirements=""
baseline=""
run_timeout=300
port=""
out_dir=""
verbose=""
one_process=""

die() { echo "conformance: error: $*" >&2; exit 2; }
say() { echo "conformance: $*" >&2; }

while (($#)); do
  case "$1" in
    --suite) suite="${2:?}"; shift 2 ;;
    --scenario) scenario="${2:?}"; shift 2 ;;
    --spec-version) spec_version="${2:?}"; shift 2 ;;
    --requirements) requirements="${2:?}"; shift 2 ;;
    --alpha) CONFORMANCE="$CONFORMANCE_ALPHA"; shift ;;
    --expected-failures) baseline="${2:?}"; shift 2 ;;
    --timeout) run_timeout="${2:?}"; shift 2 ;;
    --port) port="${2:?}"; shift 2 ;;
    --output-dir) out_dir="${2:?}"; shift 2 ;;
    --verbose) verbose=1; shift ;;
    --one-process) one_process=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
(($#)) || die "missing server command (put it after --); see --help"
[[ "$run_timeout" =~ ^[0-9]+$ ]] || die "--timeout wants whole seconds"

for f in "$NODE22" "$SUPERGATEWAY" "$CONFORMANCE"; do
  [[ -e "$f" ]] || die "$f is missing: run scripts/setup-interop.sh first"
done

# supergateway runs the command through a shell, so quote each word once. A relative
# program path is made absolute, since the bridge's children start in this directory anyway
# but a reader of the log should see what ran.
first="$1"; shift
if [[ "$first" == */* && "$first" != /* ]]; then first="$PWD/$first"; fi
server_cmd="$(printf '%q' "$first")"
for word in "$@"; do server_cmd+=" $(printf '%q' "$word")"; done

if [[ -z "$port" ]]; then
  port="$(node -e '
    const s = require("net").createServer().listen(0, "127.0.0.1", () => {
      console.log(s.address().port); s.close(); });')" || die "cannot find a free port"
fi
url="http://127.0.0.1:$port/mcp"
if [[ -z "$out_dir" ]]; then out_dir="$INTEROP/conformance-results/$(date -u +%Y%m%dT%H%M%SZ)"; fi
mkdir -p "$out_dir"
bridge_log="$out_dir/supergateway.log"

work="$(mktemp -d)"
bridge_pid=""
suite_pid=""
# Every process of the bridge's tree carries this variable: supergateway spawns its stdio
# children detached (each in its own process group), and they are re-parented if the bridge
# dies first, so neither the process group nor the parent link finds them all; this does.
marker="MCPIPE_CONFORMANCE_RUN=$$-$RANDOM$RANDOM"

# shellcheck disable=SC2317  # reached through the EXIT trap
marked_pids() {
  grep -lzx -- "$marker" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}

alive() { kill -0 "$1" 2>/dev/null; }

# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  if [[ -n "$suite_pid" ]] && alive "$suite_pid"; then kill -TERM "$suite_pid" 2>/dev/null || true; fi
  if [[ -n "$bridge_pid" ]] && alive "$bridge_pid"; then
    # supergateway's own shutdown SIGTERMs each child's group and SIGKILLs it after 5 s.
    kill -TERM "$bridge_pid" 2>/dev/null || true
    for _ in $(seq 1 80); do alive "$bridge_pid" || break; sleep 0.1; done
  fi
  local pid left
  left="$(marked_pids)"
  if [[ -n "$left" ]]; then
    say "killing leftover bridge processes: ${left//$'\n'/ }"
    for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
  fi
  wait 2>/dev/null || true
  exec 3>&- 2>/dev/null || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# supergateway exits when its stdin closes, so give it a FIFO that this script holds open
# (fd 3): it stays up while we run and sees EOF if this script dies without its trap.
mkfifo "$work/bridge-stdin"
exec 3<>"$work/bridge-stdin"

if [[ -n "$one_process" ]]; then
  say "bridge: one_process_bridge.mjs --stdio '$server_cmd' on $url (log: $bridge_log)"
  env "$marker" timeout --kill-after=10 "$((run_timeout + 30))" \
    node "$ONE_PROCESS_BRIDGE" --stdio "$server_cmd" --port "$port" --path /mcp \
      <&3 >"$bridge_log" 2>&1 &
else
  say "bridge: supergateway --stdio '$server_cmd' on $url (log: $bridge_log)"
  env "$marker" timeout --kill-after=10 "$((run_timeout + 30))" \
    node --require "$INTEROP/loopback_only.cjs" "$SUPERGATEWAY" \
      --stdio "$server_cmd" \
      --outputTransport streamableHttp --stateful --sessionTimeout 120000 \
      --port "$port" --streamableHttpPath /mcp --logLevel info \
      <&3 >"$bridge_log" 2>&1 &
fi
bridge_pid=$!

for _ in $(seq 1 100); do
  if ! alive "$bridge_pid"; then
    tail -n 20 "$bridge_log" >&2 || true
    die "the bridge exited during startup"
  fi
  if (exec 9<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  sleep 0.1
done
(exec 9<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || die "the bridge did not listen on 127.0.0.1:$port within 10 s"
# $bridge_pid is the `timeout` wrapper; signal the bridge itself so it can stop its children.
real_bridge="$(pgrep -P "$bridge_pid" | head -n1 || true)"
if [[ -n "$real_bridge" ]]; then bridge_pid="$real_bridge"; fi

args=(server --url "$url" --output-dir "$out_dir")
if [[ -n "$scenario" ]]; then args+=(--scenario "$scenario")
elif [[ -n "$requirements" ]]; then args+=(--requirements "$requirements")
else args+=(--suite "$suite"); fi
[[ -n "$spec_version" ]] && args+=(--spec-version "$spec_version")
[[ -n "$baseline" ]] && args+=(--expected-failures "$baseline")
[[ -n "$verbose" ]] && args+=(--verbose)

say "suite: conformance ${args[*]} (bound ${run_timeout}s)"
set +e
timeout --kill-after=10 "$run_timeout" "$NODE22" "$CONFORMANCE" "${args[@]}" </dev/null &
suite_pid=$!
wait "$suite_pid"
status=$?
set -e
suite_pid=""
if ((status == 124)); then say "the suite ran past ${run_timeout}s and was stopped"; fi
say "exit status $status; results in $out_dir"
exit "$status"
