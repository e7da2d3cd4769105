#!/usr/bin/env bash
# NVIDIA's perf_analyzer, for the cross-check of the toolkit's load clients (`tsbatch bench
# clients`) and the test that runs its default mode against a real TorchServe. It is not a
# runtime dependency and never goes into the venv: the tritonclient==2.40.0 wheel is the
# last one that ships the binary (the venv pins a newer tritonclient), so only the binary is
# unpacked, beside libcudart.so.12 from the nvidia-cuda-runtime-cu12 wheel (it needs the
# library, not a GPU), into build/perf_analyzer/, with a wrapper that finds the library.
# Its other library, libb64.so.0d, is Debian's libb64-0d (apt-get when root, else the
# command is printed and the test skips with the reason). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
TRITONCLIENT=2.40.0
CUDA_RUNTIME=12.9.79
DEST=build/perf_analyzer
PYTHON=${PYTHON:-python3}
if [ -x "$DEST/perf_analyzer" ] && "$DEST/perf_analyzer" --version >/dev/null 2>&1; then
  exit 0
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libb64\.so\.0d'; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "[perf_analyzer] libb64.so.0d not found: installing Debian's libb64-0d with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq libb64-0d >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq libb64-0d >/dev/null; }
  else
    echo "[perf_analyzer] needs libb64.so.0d; the perf_analyzer test will be skipped. Install it with:" >&2
    echo "                sudo apt-get install -y libb64-0d   (Debian/Ubuntu)" >&2
    exit 0
  fi
fi
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
echo "[perf_analyzer] unpacking the binary of tritonclient==$TRITONCLIENT and libcudart of nvidia-cuda-runtime-cu12==$CUDA_RUNTIME into $DEST/"
if ! "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$download" \
     "tritonclient==$TRITONCLIENT" "nvidia-cuda-runtime-cu12==$CUDA_RUNTIME"; then
  echo "[perf_analyzer] could not download the wheels (no package index?); the perf_analyzer test will be skipped" >&2
  exit 0
fi
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib"
"$PYTHON" - "$download" "$DEST" <<'PY'
import sys, zipfile
from pathlib import Path

download, dest = Path(sys.argv[1]), Path(sys.argv[2])
wanted = {"/data/bin/perf_analyzer": dest / "bin" / "perf_analyzer", "/lib/libcudart.so.12": dest / "lib" / "libcudart.so.12"}
for wheel in download.glob("*.whl"):
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            for suffix, target in wanted.items():
                if name.endswith(suffix):
                    target.write_bytes(archive.read(name))
                    target.chmod(0o755)
missing = [str(t) for t in wanted.values() if not t.exists()]
if missing:
    sys.exit(f"[perf_analyzer] the wheels did not hold {missing}")
PY
cat >"$DEST/perf_analyzer" <<'SH'
#!/usr/bin/env bash
# perf_analyzer from tritonclient 2.40.0, with the libcudart.so.12 unpacked beside it.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$here/bin/perf_analyzer" "$@"
SH
chmod +x "$DEST/perf_analyzer"
"$DEST/perf_analyzer" --version
