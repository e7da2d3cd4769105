#!/usr/bin/env bash
# TorchServe's frontend needs Java 17 or newer. Install it when we can (root + apt),
# otherwise stop with the exact command to run.
set -euo pipefail
java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}
if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "[java] Java 17 not found: installing openjdk-17-jre-headless with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  java -version
  exit 0
fi
echo "[java] TorchServe needs Java 17. Install it, then re-run make:" >&2
echo "       sudo apt-get install -y openjdk-17-jre-headless   (Debian/Ubuntu)" >&2
exit 1
