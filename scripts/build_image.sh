#!/usr/bin/env bash
# `make image`: build the Dockerfile as written with buildah, where no Docker engine runs
# and no container registry is reachable. The base it names (python:3.11-slim-bookworm)
# is taken from local storage when present; otherwise a stand-in is made once with
# debootstrap: Debian bookworm (whose Python is 3.11) with `python` on PATH, this host's
# CA bundle and a pip.conf for its package mirror (what a site's own base image carries).
# Root, buildah and debootstrap are needed (installed with apt-get when missing).
#   IMAGE=localhost/torchserve-batch-toolkit:dev ALLOW_DIGITS=1 bash scripts/build_image.sh
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-localhost/torchserve-batch-toolkit:dev}
ALLOW_DIGITS=${ALLOW_DIGITS:-0}
BASE=localhost/python:3.11-slim-bookworm
ROOTFS=${ROOTFS:-/var/tmp/tsbatch-bookworm-rootfs}
if [ "$(id -u)" != "0" ]; then
  echo "[image] needs root (buildah's chroot isolation, debootstrap)" >&2
  exit 1
fi
if ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null; then
  echo "[image] installing buildah and debootstrap with apt-get"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends buildah debootstrap >/dev/null
fi
B=(buildah --storage-driver overlay)
if ! "${B[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  if [ ! -x "$ROOTFS/usr/bin/python3" ]; then
    echo "[image] making the base stand-in with debootstrap (a few minutes)"
    debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
      bookworm "$ROOTFS" http://deb.debian.org/debian >/dev/null
  fi
  cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
  {
    echo "[global]"
    echo "cert = /etc/ssl/certs/ca-certificates.crt"
    if [ -d /opt/pypi/simple ]; then echo "extra-index-url = file:///opt/pypi/simple file:///opt/pypi-more/simple"; fi
    if [ -d /opt/wheels ]; then echo "find-links = /opt/wheels"; fi
  } >"$ROOTFS/etc/pip.conf"
  ctr=$("${B[@]}" from scratch)
  "${B[@]}" copy "$ctr" "$ROOTFS" / >/dev/null
  "${B[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$ctr"
  "${B[@]}" commit "$ctr" "$BASE" >/dev/null
  "${B[@]}" rm "$ctr" >/dev/null
fi
# The host's local package folders that the stand-in's /etc/pip.conf names: read-only
# mounts during the build, not Dockerfile edits.
mounts=()
for dir in /opt/pypi /opt/pypi-more /opt/wheels; do
  if [ -d "$dir" ]; then mounts+=(-v "$dir:$dir:ro"); fi
done
"${B[@]}" bud --isolation chroot --network host --layers --format docker "${mounts[@]}" \
  --build-arg "PYTHON_IMAGE=$BASE" --build-arg "TSBATCH_ALLOW_DIGITS=$ALLOW_DIGITS" -t "$IMAGE" .
# Smoke check inside the built image: the venv's interpreter has the runtime, the archives exist.
ctr=$("${B[@]}" from "$IMAGE")
trap '"${B[@]}" rm "$ctr" >/dev/null' EXIT
"${B[@]}" run --isolation chroot "$ctr" -- /opt/venv/bin/python -c \
  'import sys, torch, ts, nvgpu, pynvml, locust; print("[image] python", sys.prefix, "torch", torch.__version__, "cuda", torch.version.cuda)'
"${B[@]}" run --isolation chroot "$ctr" -- sh -c 'ls /app/model-store/*.mar && du -sh /opt/venv'
echo "[image] built $IMAGE"
