#!/usr/bin/env bash
# The report test (tests/test_workflow_run.py) opens report.html in a real headless
# Chromium. `make test` calls this first: with Chromium on PATH it does nothing; as root on
# Debian/Ubuntu it installs the distribution's package (set CHROMIUM_INSTALL=no to skip);
# otherwise it says how to install it, and that one test is skipped with the same message.
set -euo pipefail

for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then
        exit 0
    fi
done
if [ "${CHROMIUM_INSTALL:-auto}" = "no" ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "ensure_chromium: no Chromium on PATH; the report's browser test will be skipped" \
        "(Debian: apt-get install chromium)" >&2
    exit 0
fi
echo "ensure_chromium: installing Debian's chromium for the report's browser test" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq chromium >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null
    apt-get install -y -qq chromium >/dev/null
}
