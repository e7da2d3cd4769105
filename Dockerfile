# One GPU-capable image serving both models (resnet18, bert_intent) with TorchServe.
#
#   docker build -t torchserve-batch-toolkit .
#   docker run --gpus all -p 8080-8082:8080-8082 torchserve-batch-toolkit
#   docker exec <container> python /app/deploy/probe.py key inference   # a client token
#
# The commands below are the Makefile's (`make install`, `make archive`) and the test
# runner's (`torchserve --start --foreground ...`); tests/unit/deploy/test_dockerfile.py keeps
# them the same and lints this file with hadolint. The torch wheel pinned in
# requirements.txt carries its CUDA libraries, so a slim Python base is enough with the
# NVIDIA container runtime (no CUDA base image, no driver in the image).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- runtime base
FROM ${PYTHON_IMAGE} AS runtime-base
# Java 17 runs TorchServe's frontend. tini is PID 1 and forwards SIGTERM to the whole
# process group (-g), so the Java frontend and the Python workers stop cleanly; the
# torchserve launcher alone would ignore it as PID 1. Debian's security updates replace
# package versions, so apt packages are not pinned (pinned ones vanish from the mirror).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini \
    && rm -rf /var/lib/apt/lists/*
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# ---------------------------------------------------------------- build: venv + archives
FROM runtime-base AS build
WORKDIR /app
COPY requirements.txt ./
# `make install`: the same commands and pinned requirements (pip itself is upgraded as
# the Makefile does; every package comes pinned from requirements.txt).
# hadolint ignore=DL3013
RUN python -m venv /opt/venv \
    && python -m pip install --no-cache-dir --upgrade pip \
    && python -m pip install --no-cache-dir -r requirements.txt
COPY pyproject.toml models.yaml config.properties metrics.yaml ./
COPY handlers/ handlers/
COPY tsbatch/ tsbatch/
COPY scripts/ scripts/
COPY data/ data/
# `make archive`: export (ImageNet weights when the build can download them, otherwise
# the offline digits fallback; the intent model trains on data/intents), verify, package.
# The toolkit itself goes in first, editable as in `make install` (its paths resolve to /app).
RUN python -m pip install --no-cache-dir --no-deps --editable . \
    && python -m scripts.build

# ---------------------------------------------------------------- serving image
FROM runtime-base
LABEL org.opencontainers.image.title="torchserve-batch-toolkit" \
      org.opencontainers.image.description="TorchServe with batch-aware handlers for resnet18 and bert_intent"
RUN useradd --create-home --uid 1000 --user-group --shell /usr/sbin/nologin model-server
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app/model-store /app/model-store
COPY pyproject.toml models.yaml config.properties metrics.yaml /app/
COPY handlers/ /app/handlers/
COPY tsbatch/ /app/tsbatch/
COPY scripts/ /app/scripts/
COPY loadtest/ /app/loadtest/
COPY data/ /app/data/
COPY deploy/ /app/deploy/
# GPUs: the NVIDIA runtime mounts the driver when these are set (or --gpus is given).
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    LOG_LOCATION=/home/model-server/logs \
    METRICS_LOCATION=/home/model-server/logs \
    TS_KEY_FILE=/home/model-server/key_file.json
USER 1000:1000
# TorchServe writes key_file.json (mode 600) into its working directory.
WORKDIR /home/model-server
EXPOSE 8080 8081 8082
# /ping needs a token in TorchServe 0.12 and stays "Healthy" while a worker restarts, so
# the check reads the key file and asks for READY workers (deploy/probe.py).
HEALTHCHECK --interval=30s --timeout=10s --start-period=10m --retries=3 \
    CMD ["python", "/app/deploy/probe.py", "ready"]
ENTRYPOINT ["tini", "-g", "--"]
# Foreground: TorchServe is the main process, so a crash stops the container.
CMD ["torchserve", "--start", "--foreground", "--ncs", "--model-store", "/app/model-store", "--ts-config", "/app/deploy/config.container.properties"]
