#!/usr/bin/env bash
# Debian packages the test suite needs, installed only when missing. The tests start
# their own throwaway services; nothing here is left running.
set -euo pipefail

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# Browser tests drive Debian's chromium through Playwright (never `playwright install`).
[ -x /usr/bin/chromium ] || need+=(chromium)
# No font package: the plots' CJK font is the noto-cjk-sans-otc wheel of the notebook extra,
# which `make course` installs too. (Chromium's screenshots of zh pages, which no test
# reads, draw Chinese only where the machine has a CJK font of its own.)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
  echo "system-deps: missing ${need[*]}; install them (apt-get install ${need[*]}) and re-run" >&2
  exit 1
fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "system-deps: installing ${need[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
