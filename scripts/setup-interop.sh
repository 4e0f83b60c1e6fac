#!/usr/bin/env bash
# Installs the interop tooling into interop/ (both folders are git-ignored):
#   interop/.venv          the official MCP Python SDK and mcp-server-time (interop/requirements.txt)
#   interop/node_modules   the official TypeScript SDK, server-everything, the conformance suite
#                          (stable 0.1.16, and 0.2.0-alpha.12 as the npm alias conformance-alpha),
#                          supergateway and a Node 22 binary for the suite (interop/package-lock.json)
#
#   scripts/setup-interop.sh            # install what is missing or out of date, print versions
#   SETUP_INTEROP_FORCE=1 scripts/setup-interop.sh   # reinstall both sides
#
# Idempotent: each side records a hash of its pin file (plus the interpreter version) after a
# successful install, and is skipped while that hash matches and a smoke import still works.
# Any failed step exits non-zero with a message naming it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INTEROP="$ROOT/interop"
VENV="$INTEROP/.venv"
PYTHON="${PYTHON:-python3}"
STEP_TIMEOUT="${SETUP_INTEROP_TIMEOUT:-600}"   # seconds, per install step
FORCE="${SETUP_INTEROP_FORCE:-0}"
PY_STAMP="$VENV/.mcpipe-setup-stamp"
NODE_STAMP="$INTEROP/node_modules/.mcpipe-setup-stamp"
NODE22_EXPECTED="v22.23.3"   # keep in step with "node" in interop/package.json

die() { echo "setup-interop: error: $*" >&2; exit 1; }
say() { echo "setup-interop: $*" >&2; }
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is not on PATH"; }

need "$PYTHON"
need node
need npm
need sha256sum
need timeout

# --- Python: interop/.venv -------------------------------------------------------------

py_version="$("$PYTHON" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')" \
  || die "cannot run $PYTHON"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "Python >= 3.10 is needed for the MCP Python SDK, found $py_version"
py_want="$( (cat "$INTEROP/requirements.txt"; echo "python $py_version") | sha256sum | cut -d' ' -f1)"

py_ready() {
  [[ -x "$VENV/bin/python" && -f "$PY_STAMP" && "$(cat "$PY_STAMP")" == "$py_want" ]] &&
    "$VENV/bin/python" -c 'import mcp, mcp_server_time' >/dev/null 2>&1
}

if [[ "$FORCE" != 1 ]] && py_ready; then
  say "python venv up to date"
else
  # A venv made by another interpreter (or half made) is rebuilt rather than patched.
  if [[ -d "$VENV" ]] && ! "$VENV/bin/python" -c 'import sys; sys.exit(0 if "%d.%d.%d" % sys.version_info[:3] == sys.argv[1] else 1)' "$py_version" >/dev/null 2>&1; then
    say "removing stale venv $VENV"
    rm -rf "$VENV"
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    say "creating venv $VENV with $PYTHON $py_version"
    timeout "$STEP_TIMEOUT" "$PYTHON" -m venv "$VENV" || die "python -m venv failed"
  fi
  rm -f "$PY_STAMP"
  say "pip install -r interop/requirements.txt"
  timeout "$STEP_TIMEOUT" "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    -r "$INTEROP/requirements.txt" || die "pip install failed"
  "$VENV/bin/python" -c 'import mcp, mcp_server_time' || die "the venv cannot import mcp / mcp_server_time"
  [[ -x "$VENV/bin/mcp-server-time" ]] || die "pip did not install the mcp-server-time script"
  echo "$py_want" > "$PY_STAMP"
fi

# --- Node: interop/node_modules ---------------------------------------------------------

node_major="$(node -p 'process.versions.node.split(".")[0]')"
(( node_major >= 20 )) || die "Node >= 20 is needed (supergateway, the SDK), found $(node --version)"
node_want="$(cat "$INTEROP/package.json" "$INTEROP/package-lock.json" | sha256sum | cut -d' ' -f1)"

node_ready() {
  [[ -f "$NODE_STAMP" && "$(cat "$NODE_STAMP")" == "$node_want" ]] &&
    [[ -x "$INTEROP/node_modules/node/bin/node" ]] &&
    [[ "$("$INTEROP/node_modules/node/bin/node" --version 2>/dev/null)" == "$NODE22_EXPECTED" ]] &&
    [[ -f "$INTEROP/node_modules/@modelcontextprotocol/sdk/package.json" ]] &&
    [[ -f "$INTEROP/node_modules/conformance-alpha/package.json" ]]
}

if [[ "$FORCE" != 1 ]] && node_ready; then
  say "node_modules up to date"
else
  # npm ci installs exactly the committed lock (and fails if package.json disagrees with it).
  # The "node" package's preinstall fetches the Node 22 binary package from the registry;
  # package.json's allowScripts approves that one install script.
  say "npm ci in interop/"
  (cd "$INTEROP" && timeout "$STEP_TIMEOUT" npm ci --no-audit --no-fund --loglevel=error) \
    || die "npm ci failed in $INTEROP"
  [[ -x "$INTEROP/node_modules/node/bin/node" ]] || die "the node@22 package did not install its binary"
  got="$("$INTEROP/node_modules/node/bin/node" --version)" || die "the Node 22 binary does not run"
  [[ "$got" == "$NODE22_EXPECTED" ]] || die "expected Node $NODE22_EXPECTED from the node package, got $got"
  echo "$node_want" > "$NODE_STAMP"
fi

# --- versions ---------------------------------------------------------------------------

echo "installed:"
echo "  python                                  $("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0])')"
"$VENV/bin/python" - <<'EOF' || die "cannot read Python package versions"
from importlib.metadata import version
for name in ("mcp", "mcp-types", "mcp-server-time"):
    print(f"  {name:<40}{version(name)}")
EOF
echo "  node (system)                           $(node --version)"
echo "  node (interop/node_modules, for the conformance suite) $("$INTEROP/node_modules/node/bin/node" --version)"
# shellcheck disable=SC2016  # the single-quoted text is JavaScript, not shell
(cd "$INTEROP" && node -e '
  const names = ["@modelcontextprotocol/sdk", "@modelcontextprotocol/server-everything",
                 "@modelcontextprotocol/conformance", "conformance-alpha", "supergateway"];
  for (const n of names) {
    const v = require(`./node_modules/${n}/package.json`).version;
    console.log(`  ${n.padEnd(40)}${v}`);
  }') || die "cannot read npm package versions"
