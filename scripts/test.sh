#!/usr/bin/env bash
# The project's test command (README): installs what the interop tests need, then runs every
# test. Works on a fresh machine with the Rust toolchain, Python 3 and Node.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh --test server_loop   # extra arguments go to `cargo test`
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The official Python and TypeScript MCP SDKs and the third-party servers the interop tests
# drive (into git-ignored interop/.venv and interop/node_modules). Fast when already installed.
scripts/setup-interop.sh

cargo test "$@"
