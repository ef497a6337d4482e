#!/bin/sh
# make interop: hotseam acp against a client written on the official ACP TypeScript SDK,
# then hotseam mcp against the MCP Inspector and the MCP conformance suite (interop/mcp/).
#
# Installs the SDK version pinned in interop/package.json (and package-lock.json) into
# interop/node_modules (git-ignored), then runs interop/client.mjs: one `hotseam acp`
# process per scenario, one PASS/FAIL line each; exits non-zero if any scenario fails.
# INTEROP_TRANSCRIPT=DIR keeps each scenario's JSON-RPC messages as DIR/NAME.jsonl.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

command -v node >/dev/null 2>&1 || { echo "interop: node is not on PATH" >&2; exit 2; }
command -v npm >/dev/null 2>&1 || { echo "interop: npm is not on PATH" >&2; exit 2; }
test -x "$root/.venv/bin/hotseam" || { echo "interop: $root/.venv/bin/hotseam is missing (make test sets it up)" >&2; exit 2; }

installed="$here/node_modules/@agentclientprotocol/sdk/package.json"
pinned=$(sed -n 's/.*"@agentclientprotocol\/sdk": *"\([^"]*\)".*/\1/p' "$here/package.json")
if ! grep -q "\"version\": \"$pinned\"" "$installed" 2>/dev/null; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "interop: @agentclientprotocol/sdk $pinned, node $(node --version), $("$root/.venv/bin/hotseam" --version 2>/dev/null || echo hotseam)"

cd "$root"
status=0
HOTSEAM="$root/.venv/bin/hotseam" node "$here/client.mjs" "$@" || status=$?
# hotseam mcp: the MCP Inspector's CLI and the conformance suite (interop/mcp/run.sh).
sh "$here/mcp/run.sh" || status=1
exit "$status"
