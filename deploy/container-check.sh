#!/usr/bin/env bash
# The image built and run as a deployment runs it, where a container engine works (CI tests the
# same install steps without one: .ci/wheel-check). Builds the image, checks it has no torch and
# runs as a non-root user, indexes the example docs into a volume, then starts `serve` (Socket
# Mode) against Slack stand-ins (python -m tests.standins.standin, from the dev venv): passes once the
# bot has answered a mention and the image's own HEALTHCHECK passes.
#
#   deploy/container-check.sh
#   ENGINE="podman --runtime runc" ENGINE_ARGS="--ulimit nofile=1024:1024 --ulimit nproc=1000:1000" \
#     BUILD_ARGS="--network host --build-arg BASE=localhost/debian-python:bookworm ..." \
#     deploy/container-check.sh                  # how it ran in this project's sandbox
#
# ENGINE: docker (default) or podman, with global flags; ENGINE_ARGS: added to every build and run;
# BUILD_ARGS: to the build only; PYTHON: the dev venv's python (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a engine <<<"${ENGINE:-docker}"
read -r -a common <<<"${ENGINE_ARGS:-}"
read -r -a build <<<"${BUILD_ARGS:-}"
python=${PYTHON:-.venv/bin/python}
image=fieldguide:check
name=fieldguide-check-$$
volume=fieldguide-check-$$
tmp=$(mktemp -d)
standin=
cleanup() {
    if [ -n "$standin" ]; then kill "$standin" 2>/dev/null || true; fi
    "${engine[@]}" rm -f "$name" >/dev/null 2>&1 || true
    "${engine[@]}" volume rm "$volume" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
say() { printf 'container-check: %s\n' "$*"; }

format=()
# podman's default OCI format drops HEALTHCHECK
if [ "${engine[0]}" = podman ]; then format=(--format docker); fi
"${engine[@]}" build "${format[@]}" "${common[@]}" "${build[@]}" -t "$image" .
run=("${engine[@]}" run --rm "${common[@]}")
"${run[@]}" --entrypoint sh "$image" -c \
    '! python3 -c "import torch" 2>/dev/null && [ "$(id -u)" != 0 ] && id -un' | grep -qx fieldguide
say "no torch in the image; runs as the user fieldguide"
"${run[@]}" -v "$PWD/examples/docs:/docs:ro" -v "$volume:/data" "$image" index /docs --quiet
say "indexed the example docs into /data"

PYTHONPATH=$PWD "$python" -m tests.standins.standin "$tmp/url" >"$tmp/standin.out" &
standin=$!
for _ in $(seq 100); do [ -s "$tmp/url" ] && break; sleep 0.1; done
port=$("$python" -c "from tests.standins.pgserver import free_port; print(free_port())")
# the host's network: the stand-ins listen on its 127.0.0.1
"${engine[@]}" run -d --name "$name" "${common[@]}" --network host -v "$volume:/data" \
    -e SLACK_BOT_TOKEN=xoxb-check -e SLACK_APP_TOKEN=xapp-check \
    -e SLACK_API_BASE_URL="$(cat "$tmp/url")" -e FIELDGUIDE_HEALTH_PORT="$port" "$image" >/dev/null
# the stand-in says once the bot has answered, and goes on serving it for the health check
until grep -q "^standin: answered" "$tmp/standin.out"; do
    if ! kill -0 "$standin" 2>/dev/null; then
        "${engine[@]}" logs "$name" 2>&1 | tail -20
        exit 1
    fi
    sleep 0.5
done
say "$(grep "^standin: answered" "$tmp/standin.out" | cut -c1-120)"
healthy=
for _ in $(seq 60); do
    if [ "${engine[0]}" = podman ]; then
        "${engine[@]}" healthcheck run "$name" >/dev/null 2>&1 && healthy=1
    else
        [ "$(docker inspect --format '{{.State.Health.Status}}' "$name")" = healthy ] && healthy=1
    fi
    [ -n "$healthy" ] && break
    sleep 2
done
[ -n "$healthy" ] || { say "the HEALTHCHECK did not pass"; "${engine[@]}" logs "$name" 2>&1 | tail -20; exit 1; }
say "the bot answered a Socket Mode mention and its HEALTHCHECK passes"
say ok
