#!/usr/bin/env bash
# Installs what the test suite needs beyond Java and Maven: Debian's chromium and chromium-driver
# for the browser test of the web page (WebPageBrowserTest). Idempotent: does nothing when
# /usr/bin/chromium and /usr/bin/chromedriver are already there.
set -euo pipefail

if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    exit 0
fi

SUDO=()
if [[ "$(id -u)" != 0 ]]; then
    SUDO=(sudo)
fi
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver

for bin in /usr/bin/chromium /usr/bin/chromedriver; do
    if [[ ! -x "$bin" ]]; then
        echo "install-test-deps: $bin still missing after apt-get install" >&2
        exit 1
    fi
done
echo "install-test-deps: $(/usr/bin/chromium --version 2>/dev/null || echo chromium), $(/usr/bin/chromedriver --version 2>/dev/null | head -1)"
