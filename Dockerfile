# One GPU-capable image serving both models (resnet18, bert_intent) with TorchServe.
#
#   docker build -t torchserve-batch-toolkit .       # fails without real ResNet weights:
#   docker build --build-arg TSBATCH_ALLOW_DIGITS=1 -t torchserve-batch-toolkit .   # demo only
#   docker run --gpus all -p 8080-8082:8080-8082 torchserve-batch-toolkit
#   docker exec <container> python /app/deploy/probe.py key inference   # a client token
#
# The commands below are the Makefile's (`make install`, `make archive`) and the test
# runner's (`torchserve --start --foreground ...`): tests/unit/deploy/test_dockerfile.py keeps
# them the same, lints this file with hadolint, and runs the ENV/WORKDIR/RUN lines as
# written in an isolated root. The torch wheel pinned in requirements.txt carries its CUDA
# libraries, so a slim Python base is enough with the NVIDIA container runtime (no CUDA
# base image, no driver in the image).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- runtime base
FROM ${PYTHON_IMAGE} AS runtime-base
# Java 17 runs TorchServe's frontend. tini is PID 1 (reaps zombies, forwards signals to
# deploy/start.py, which drains before stopping TorchServe: see docs/production.md).
# Debian's security updates replace package versions, so apt packages are not pinned
# (pinned ones vanish from the mirror).
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
# `make install`: the same commands, with the runtime requirements only (the Makefile adds
# requirements-dev.txt). Every command after `venv` names the venv's interpreter by its
# path, so the packages land in /opt/venv however `python` is resolved: a bare `python`
# looked up before /opt/venv/bin existed may stay the base one (a `python` that execs the
# interpreter by full path, as pyenv's shims do, then installed everything there).
# hadolint ignore=DL3013
RUN python -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install --no-cache-dir --upgrade pip \
    && /opt/venv/bin/python -m pip install --no-cache-dir -r requirements.txt
COPY pyproject.toml models.yaml config.properties metrics.yaml log4j2.xml ./
COPY handlers/ handlers/
COPY tsbatch/ tsbatch/
COPY data/ data/
# `make archive`: export (ResNet weights from models.yaml's `weights.path`, which may point
# into the build context, or torchvision's ImageNet weights; the intent model trains on
# data/intents), verify, package. Unlike `make archive`, the image refuses the offline
# digits placeholder unless the build is run with --build-arg TSBATCH_ALLOW_DIGITS=1.
# The toolkit itself goes in first, editable as in `make install` (its paths resolve to /app),
# which puts the `tsbatch` command into /opt/venv/bin.
ARG TSBATCH_ALLOW_DIGITS=0
RUN /opt/venv/bin/python -m pip install --no-cache-dir --no-deps --editable . \
    && /opt/venv/bin/tsbatch archive
# `make plugins`: the frontend plugin serving the Open Inference Protocol's health,
# readiness and metadata routes (plugins/oip), compiled against the torchserve wheel's
# frontend jar into build/plugins/ (plugins_path in the container configs). javac comes
# with the JDK, needed in this stage only; the serving image keeps the JRE.
COPY plugins/ plugins/
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jdk-headless \
    && rm -rf /var/lib/apt/lists/* \
    && /opt/venv/bin/tsbatch plugins

# ---------------------------------------------------------------- serving image
FROM runtime-base
LABEL org.opencontainers.image.title="torchserve-batch-toolkit" \
      org.opencontainers.image.description="TorchServe with batch-aware handlers for resnet18 and bert_intent"
RUN useradd --create-home --uid 1000 --user-group --shell /usr/sbin/nologin model-server
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app/model-store /app/model-store
# The exported artifacts: deploy/start.py repackages from them when a mounted
# config.properties changes batch settings (the archives would otherwise win).
COPY --from=build /app/build /app/build
COPY pyproject.toml models.yaml config.properties metrics.yaml log4j2.xml /app/
COPY handlers/ /app/handlers/
COPY tsbatch/ /app/tsbatch/
COPY loadtest/ /app/loadtest/
COPY data/ /app/data/
COPY deploy/ /app/deploy/
# GPUs: the NVIDIA runtime mounts the driver when these are set (or --gpus is given).
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    LOG_LOCATION=/home/model-server/logs \
    METRICS_LOCATION=/home/model-server/logs \
    TS_KEY_FILE=/home/model-server/key_file.json \
    TSBATCH_WRITABLE_STORE=/home/model-server/model-store
USER 1000:1000
# TorchServe writes key_file.json (mode 600) into its working directory.
WORKDIR /home/model-server
EXPOSE 8080 8081 8082
# /ping needs a token in TorchServe 0.12 and stays "Healthy" while a worker restarts, so
# the check reads the key file and asks for READY workers (deploy/probe.py).
HEALTHCHECK --interval=30s --timeout=10s --start-period=10m --retries=3 \
    CMD ["python", "/app/deploy/probe.py", "ready"]
# deploy/start.py: rebuilds the archives' batch settings from the --ts-config file when they
# differ (a mounted config.properties wins), checks it as `make check-config` does, runs
# the command, and on SIGTERM drains (readiness fails, in-flight batches finish) before it
# stops TorchServe's frontend as `torchserve --stop` does. tini without -g: the workers
# must not get SIGTERM before their frontend has drained them.
ENTRYPOINT ["tini", "--", "python", "/app/deploy/start.py"]
# Foreground: TorchServe is the main process, so a crash stops the container.
CMD ["torchserve", "--start", "--foreground", "--ncs", "--model-store", "/app/model-store", "--ts-config", "/app/deploy/config.container.properties"]
