#!/bin/sh
# make interop, MCP part: hotseam mcp against the MCP Inspector's CLI (stdio) and the
# official MCP conformance suite (hotseam mcp --http), both pinned in package.json.
#
# Both need Node >= 22: npm installs the pinned `node` package (a Node 22 binary) into
# interop/mcp/node_modules with the tools, and this script puts that first on PATH; the
# system's node is used only to run npm. One PASS/FAIL line per check; exits non-zero if
# any check fails. The conformance suite runs with expected-failures.yml: a scenario that
# fails and is listed there passes, one that fails unlisted or passes listed fails.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
hotseam="$root/.venv/bin/hotseam"
tools="$here/tools"

command -v npm >/dev/null 2>&1 || { echo "interop mcp: npm is not on PATH" >&2; exit 2; }
test -x "$hotseam" || { echo "interop mcp: $hotseam is missing (make test sets it up)" >&2; exit 2; }

pinned() { sed -n "s|.*\"$1\": *\"\([^\"]*\)\".*|\1|p" "$here/package.json"; }
installed() { sed -n 's|^  "version": *"\([^"]*\)".*|\1|p' "$here/node_modules/$1/package.json" 2>/dev/null; }
for package in node @modelcontextprotocol/inspector @modelcontextprotocol/conformance; do
    if test "$(installed "$package")" != "$(pinned "$package")"; then
        (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
        break
    fi
done
PATH="$here/node_modules/.bin:$PATH"
export PATH
echo "interop mcp: node $(node --version), inspector $(pinned @modelcontextprotocol/inspector)," \
    "conformance $(pinned @modelcontextprotocol/conformance), $("$hotseam" --version)"

scratch=$(mktemp -d)
server=
trap 'test -z "$server" || kill "$server" 2>/dev/null; rm -rf "$scratch"' EXIT INT TERM
# The Inspector keeps a catalog of servers (default ~/.mcp-inspector): a scratch one here.
MCP_CATALOG_PATH="$scratch/catalog.json"
export MCP_CATALOG_PATH
failed=0

# inspector CHECK ARGS...: the Inspector's CLI starts `hotseam mcp tools/` over stdio, runs
# one method, and expect.mjs checks its answer (exit 5 is the CLI's "isError: true").
inspector() {
    check=$1
    shift
    # The CLI passes the server a few variables only: PYTHONPATH (to break hotseam on
    # purpose with a sitecustomize module, and see a check fail) is passed on by hand.
    status=0
    if test -n "${PYTHONPATH:-}"; then
        mcp-inspector --cli -e "PYTHONPATH=$PYTHONPATH" "$hotseam" mcp "$tools" "$@" \
            >"$scratch/answer.json" 2>"$scratch/stderr" || status=$?
    else
        mcp-inspector --cli "$hotseam" mcp "$tools" "$@" \
            >"$scratch/answer.json" 2>"$scratch/stderr" || status=$?
    fi
    if { test $status -eq 0 || test $status -eq 5; } && node "$here/expect.mjs" "$check" <"$scratch/answer.json"; then
        echo "PASS  inspector: $check"
    else
        echo "FAIL  inspector: $check (exit $status)"
        tail -n 20 "$scratch/stderr"
        failed=$((failed + 1))
    fi
}

inspector "tools/list" --method tools/list
inspector "tools/call echo" --method tools/call --tool-name echo --tool-arg text=hello
inspector "tools/call failing" --method tools/call --tool-name test_error_handling
inspector "tools/call asking, no elicitation" --method tools/call --tool-name test_elicitation \
    --tool-arg message=Who?

# `hotseam mcp --http` on a free loopback port, with a token made for this run: the
# Inspector lists its tools sending the token as a header, then the conformance suite runs
# its server scenarios (all suites) with the token in the URL as ?token= (it takes only a
# URL); expected-failures.yml lists the scenarios hotseam cannot pass.
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
HOTSEAM_WEB_TOKEN=$token XDG_STATE_HOME="$scratch/state" \
    "$hotseam" mcp --http 0 --log-format json "$tools" 2>"$scratch/http.log" &
server=$!
url=
for _ in $(seq 150); do  # the URL is logged once the listener is up (15 s at most)
    url=$(sed -n '/"mcp.http_url"/s/.*"url": "\([^"]*\)".*/\1/p' "$scratch/http.log")
    test -n "$url" && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
if test -z "$url"; then
    echo "FAIL  conformance: hotseam mcp --http logged no URL"
    tail -n 20 "$scratch/http.log"
    failed=$((failed + 1))
else
    # The Inspector over HTTP with the token in a header, as a host's configuration sends it.
    status=0
    mcp-inspector --cli "${url%%\?*}" --transport http --method tools/list \
        --header "Authorization: Bearer $token" >"$scratch/answer.json" 2>"$scratch/stderr" || status=$?
    if test $status -eq 0 && node "$here/expect.mjs" "tools/list" <"$scratch/answer.json"; then
        echo "PASS  inspector over --http (Authorization: Bearer): tools/list"
    else
        echo "FAIL  inspector over --http (Authorization: Bearer): tools/list (exit $status)"
        tail -n 20 "$scratch/stderr"
        failed=$((failed + 1))
    fi
    status=0
    conformance server --url "$url" --suite all --expected-failures "$here/expected-failures.yml" \
        -o "$scratch/conformance" >"$scratch/conformance.txt" 2>&1 || status=$?
    summary=$(grep -E '^Total:' "$scratch/conformance.txt" | tail -n 1)
    if test $status -eq 0; then
        echo "PASS  conformance: $summary, every failure in expected-failures.yml"
    else
        echo "FAIL  conformance (exit $status): $summary"
        sed -n '/SUMMARY/,$p' "$scratch/conformance.txt"
        failed=$((failed + 1))
    fi
fi
kill "$server" 2>/dev/null || true
code=0
wait "$server" || code=$?
server=
if test -n "$url" && test $code -ne 0; then
    echo "FAIL  hotseam mcp --http exited $code on SIGTERM"
    tail -n 20 "$scratch/http.log"
    failed=$((failed + 1))
fi

if test $failed -ne 0; then
    echo "FAILED: $failed MCP interop check(s)"
    exit 1
fi
echo "OK: MCP interop"
