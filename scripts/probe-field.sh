#!/usr/bin/env bash
# Probes real MCP servers from npm and PyPI with `mcpipe probe`, and prints their table
# (server, version, verdict, warnings, failures) as Markdown for docs/probe.md.
#
#   scripts/probe-field.sh                 # install what is missing, probe all, print the table
#   PROBE_FIELD_DIR=/tmp/field scripts/probe-field.sh
#   PROBE_FIELD_SCALE=3 scripts/probe-field.sh        # --time-scale for a slow machine
#   PROBE_FIELD_ONLY="mcp-server-git server-memory" scripts/probe-field.sh   # some servers only
#
# Installs happen first (network); each probe then runs without network where the system lets
# us (`unshare -n`, as root), so no server can reach out while it is probed. Every server
# chosen works offline: its state goes to a scratch folder made per run (a git repository, a
# SQLite and a DuckDB file, a memory file, a folder to serve). The versions are pinned here,
# so the table can be reproduced. JSON reports are kept in $PROBE_FIELD_DIR/results/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FIELD="${PROBE_FIELD_DIR:-$ROOT/target/probe-field}"
SCALE="${PROBE_FIELD_SCALE:-2}"
PYTHON="${PYTHON:-python3}"
STEP_TIMEOUT="${PROBE_FIELD_TIMEOUT:-900}"

NPM_PACKAGES=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/server-sequential-thinking@2026.8.31"
)
PYPI_PACKAGES=(
  "mcp-server-time==2026.10.19"
  "mcp-server-git==2026.10.19"
  # Published before MCP Python SDK 2.0, which removed the decorators they use: pinned below.
  "mcp-server-sqlite==2025.4.25 mcp==1.30.0"
  "mcp-server-calculator==0.2.1"
  "mcp-server-duckdb==1.1.0 mcp==1.30.0"
)

die() { echo "probe-field: error: $*" >&2; exit 1; }
say() { echo "probe-field: $*" >&2; }

mkdir -p "$FIELD/npm" "$FIELD/results"

# --- install ---------------------------------------------------------------------------------
if [[ ! -f "$FIELD/npm/.installed" || "$(cat "$FIELD/npm/.installed")" != "${NPM_PACKAGES[*]}" ]]; then
  say "installing ${#NPM_PACKAGES[@]} npm packages into $FIELD/npm"
  timeout "$STEP_TIMEOUT" npm install --prefix "$FIELD/npm" --no-audit --no-fund --silent \
    "${NPM_PACKAGES[@]}" || die "npm install failed"
  echo "${NPM_PACKAGES[*]}" >"$FIELD/npm/.installed"
fi
# One venv per PyPI server: their pins of the MCP SDK differ and may not resolve together.
for packages in "${PYPI_PACKAGES[@]}"; do
  venv="$FIELD/venv-${packages%%==*}"
  if [[ ! -f "$venv/.installed" || "$(cat "$venv/.installed")" != "$packages" ]]; then
    say "installing $packages into $venv"
    [[ -x "$venv/bin/python" ]] || "$PYTHON" -m venv "$venv" || die "venv for $packages failed"
    # shellcheck disable=SC2086 # a server and its extra pins, split on purpose
    timeout "$STEP_TIMEOUT" "$venv/bin/pip" install --quiet --disable-pip-version-check \
      $packages || die "pip install $packages failed"
    echo "$packages" >"$venv/.installed"
  fi
done
say "building mcpipe"
(cd "$ROOT" && cargo build --quiet --bin mcpipe) || die "cargo build failed"
MCPIPE="$ROOT/target/debug/mcpipe"

# --- scratch state, made fresh per run -------------------------------------------------------
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/probe-field.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT
mkdir -p "$SCRATCH/files" "$SCRATCH/repo"
echo "hello" >"$SCRATCH/files/hello.txt"
git -C "$SCRATCH/repo" init --quiet
echo "probe" >"$SCRATCH/repo/README"
git -C "$SCRATCH/repo" add README
git -C "$SCRATCH/repo" -c user.name=probe -c user.email=probe@example.invalid commit --quiet -m init

# The probes run without network when the system lets us.
OFFLINE=()
if unshare -n true 2>/dev/null; then
  OFFLINE=(unshare -n)
else
  say "unshare -n is not available: probing with the network on (the servers do not use it)"
fi

BIN="$FIELD/npm/node_modules/.bin"
# name | version source | command (env assignments first, as `env` takes them)
SERVERS=(
  "server-everything|npm:@modelcontextprotocol/server-everything|$BIN/mcp-server-everything stdio"
  "server-filesystem|npm:@modelcontextprotocol/server-filesystem|$BIN/mcp-server-filesystem $SCRATCH/files"
  "server-memory|npm:@modelcontextprotocol/server-memory|MEMORY_FILE_PATH=$SCRATCH/memory.json $BIN/mcp-server-memory"
  "server-sequential-thinking|npm:@modelcontextprotocol/server-sequential-thinking|$BIN/mcp-server-sequential-thinking"
  "mcp-server-time|pypi:mcp-server-time|$FIELD/venv-mcp-server-time/bin/mcp-server-time"
  "mcp-server-git|pypi:mcp-server-git|$FIELD/venv-mcp-server-git/bin/mcp-server-git --repository $SCRATCH/repo"
  "mcp-server-sqlite|pypi:mcp-server-sqlite|$FIELD/venv-mcp-server-sqlite/bin/mcp-server-sqlite --db-path $SCRATCH/field.sqlite"
  "mcp-server-calculator|pypi:mcp-server-calculator|$FIELD/venv-mcp-server-calculator/bin/mcp-server-calculator"
  "mcp-server-duckdb|pypi:mcp-server-duckdb|$FIELD/venv-mcp-server-duckdb/bin/mcp-server-duckdb --db-path $SCRATCH/field.duckdb"
)

version_of() {
  local source="$1"
  case "$source" in
    npm:*) node -p "require('$FIELD/npm/node_modules/${source#npm:}/package.json').version" ;;
    pypi:*) "$FIELD/venv-${source#pypi:}/bin/python" -c \
      "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "${source#pypi:}" ;;
  esac
}

echo "| server | version | verdict | warnings (SHOULD) | failures (MUST) |"
echo "|---|---|---|---|---|"
for entry in "${SERVERS[@]}"; do
  IFS='|' read -r name source command <<<"$entry"
  if [[ -n "${PROBE_FIELD_ONLY:-}" && " $PROBE_FIELD_ONLY " != *" $name "* ]]; then
    continue
  fi
  version="$(version_of "$source" 2>/dev/null || echo '?')"
  say "probing $name $version"
  # shellcheck disable=SC2086 # the command is split into words on purpose
  "${OFFLINE[@]}" env PATH="$(dirname "$(command -v node)"):$PATH" \
    "$MCPIPE" probe --json --time-scale "$SCALE" -- env $command \
    >"$FIELD/results/$name.json" 2>"$FIELD/results/$name.stderr" || true
  "$PYTHON" - "$FIELD/results/$name.json" "$name" "$version" <<'EOF'
import json, sys
path, name, version = sys.argv[1:]
try:
    report = json.load(open(path))
except ValueError:
    print("| %s | %s | probe error (see %s) | | |" % (name, version, path))
    sys.exit(0)
def rows(status):
    return ", ".join("`%s`" % c["name"] for c in report["checks"] if c["status"] == status)
verdict = report["verdict"] + (" with warnings" if report["warned"] and report["verdict"] == "PASS" else "")
print("| %s | %s | %s | %s | %s |" % (name, version, verdict, rows("WARN") or "none", rows("FAIL") or "none"))
EOF
done
