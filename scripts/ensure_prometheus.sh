#!/usr/bin/env bash
# The Prometheus integration test scrapes a real TorchServe with a real Prometheus
# server. Install Debian's `prometheus` package when we can (root + apt); otherwise say
# how, and let the test skip with that reason. Safe to run again: does nothing when the
# binary is already there. The package's own service is never started here.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "[prometheus] not found: installing Debian's prometheus package with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  # The package's postinst would start its own daemon on :9090 where an init system
  # runs; policy-rc.d forbids that for the duration of this install only.
  policy=/usr/sbin/policy-rc.d
  created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    created_policy=1
  fi
  trap 'if [ "$created_policy" = 1 ]; then rm -f "$policy"; fi' EXIT
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  prometheus --version 2>&1 | head -1
  exit 0
fi
echo "[prometheus] not installed; the Prometheus scrape test will be skipped. Install it with:" >&2
echo "             sudo apt-get install -y prometheus   (Debian/Ubuntu)" >&2
exit 0
