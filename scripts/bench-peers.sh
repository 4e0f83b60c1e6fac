#!/usr/bin/env bash
# mcpipe beside the official MCP SDKs, in one run of the load driver (BENCHMARKS.md, "Against
# the peers"): `mcpipe demo`, the line-echo ceiling and the naive loop as in `cargo bench`, and
# the same `echo` tool served by rmcp (Rust; with its default `stdio()` transport and with
# `stdio_pipes()`), the Python SDK and the TypeScript SDK (interop/peers/), each in a column
# of its own, every response checked.
#
#   scripts/bench-peers.sh                      # 3 rounds of every scenario (about 5 minutes here)
#   scripts/bench-peers.sh --rounds 1 ping-pong # extra arguments go to the driver
#   scripts/bench-peers.sh --test               # smoke mode: each scenario once, tiny
#
# Installs what it needs: the SDKs through scripts/setup-interop.sh, and rmcp from crates.io
# into interop/peers/rmcp_echo/target (its own lock file; about a minute the first time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
case "$ROOT" in
  *[[:space:]]*) echo "bench-peers: the checkout's path has a space; the driver splits commands on spaces" >&2; exit 1 ;;
esac

scripts/setup-interop.sh
cargo build --release --locked --manifest-path interop/peers/rmcp_echo/Cargo.toml

rounds=(--rounds 3)
for arg in "$@"; do
  case "$arg" in --rounds | --test | --smoke) rounds=() ;; esac
done

exec cargo bench --bench pipe -- ${rounds[@]+"${rounds[@]}"} \
  --peer "rmcp 3.11=$ROOT/interop/peers/rmcp_echo/target/release/rmcp_echo" \
  --peer "rmcp 3.11 pipes=$ROOT/interop/peers/rmcp_echo/target/release/rmcp_echo --pipes" \
  --peer "Python SDK 2.3=$ROOT/interop/.venv/bin/python $ROOT/interop/peers/python_echo.py" \
  --peer "TypeScript SDK 1.32=node $ROOT/interop/peers/typescript_echo.mjs" \
  "$@"
