#!/bin/sh
# `make browser-test`: the web inbox in a real headless Chromium (Debian's package, driven
# by Playwright's Python API; Playwright never downloads a browser of its own here).
set -eu

cd "$(dirname "$0")/../.."
VENV=.venv
CHROMIUM="${HOTSEAM_CHROMIUM:-/usr/bin/chromium}"

if [ ! -x "$CHROMIUM" ]; then
    echo "browser-test: $CHROMIUM is missing; installing Debian's chromium" >&2
    if [ "$(id -u)" -ne 0 ]; then
        echo "browser-test: installing chromium needs root (apt-get install -y chromium)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if ! "$VENV/bin/python" -c 'import playwright, hypercorn, starlette, httpx' 2>/dev/null; then
    echo "browser-test: installing the browser-test extra into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev,browser]'
fi

export HOTSEAM_BROWSER_TESTS=1 HOTSEAM_CHROMIUM="$CHROMIUM"
# Playwright must use the system browser, never fetch one.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
exec "$VENV/bin/pytest" tests/browser -p no:randomly -p no:cacheprovider -q -n 0 "$@"
