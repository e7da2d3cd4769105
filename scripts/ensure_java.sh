#!/usr/bin/env bash
# TorchServe's frontend needs Java 17 or newer, and `make plugins` compiles the frontend
# plugins with its javac (openjdk-17-jdk-headless, which includes the JRE,
# openjdk-17-jre-headless). Install it when we can (root + apt), otherwise stop with the
# exact command to run.
set -euo pipefail
java_major() {
  "$1" -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}
if command -v java >/dev/null 2>&1 && [ "$(java_major java)" -ge 17 ] 2>/dev/null \
  && command -v javac >/dev/null 2>&1 && [ "$(javac -version 2>&1 | awk '{split($2, v, "."); print v[1]}')" -ge 17 ] 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "[java] Java 17 with javac not found: installing openjdk-17-jdk-headless with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
  java -version
  exit 0
fi
echo "[java] TorchServe needs Java 17 and the plugins its javac. Install it, then re-run make:" >&2
echo "       sudo apt-get install -y openjdk-17-jdk-headless   (Debian/Ubuntu)" >&2
exit 1
