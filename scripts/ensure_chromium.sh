#!/usr/bin/env bash
# The load-test web UI test renders Locust's "SLA gate" tab in headless Chromium and
# saves a screenshot under reports/loadtest/. Install Debian's `chromium` package when we
# can (root + apt); otherwise say how, and let that test skip with the reason. Safe to run
# again: does nothing when /usr/bin/chromium is already there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "[chromium] not found: installing Debian's chromium package with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
  /usr/bin/chromium --version 2>/dev/null || true
  exit 0
fi
echo "[chromium] not installed; the load-test web UI screenshot test will be skipped. Install it with:" >&2
echo "           sudo apt-get install -y chromium   (Debian)" >&2
exit 0
