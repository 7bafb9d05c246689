#!/bin/sh
# The runtime install: a fresh venv holding fieldguide's wheel (installed as a package, not editable;
# no torch) and the exported ONNX model where the wheel looks for it by default
# (VENV/share/fieldguide/onnx-model: index/onnx_model.py's DEFAULT_DIR, so no setting is needed).
# The Dockerfile's runtime stage and .ci/wheel-check both run this script, so the image and what CI
# tests cannot drift apart.
#
#   deploy/install-runtime.sh [--no-bytecode] [--fleet] VENV WHEEL MODEL_DIR
#
# --no-bytecode: no .pyc files are written (80 MB less: the image's choice, where Python caches
# what it compiles elsewhere at run time, PYTHONPYCACHEPREFIX).
# --fleet: with the `fleet` extra (psycopg, psycopg-pool), for a replica or indexer of a fleet
# (FIELDGUIDE_DATABASE_URL); the image's choice, so one image serves one machine or a fleet.
# MODEL_DIR: a folder `python -m index.onnx_model` exported (`make setup` puts it in
# .venv/share/fieldguide/onnx-model); only the int8 model, the tokenizer and the manifest are copied.
# PYTHON: the interpreter to make the venv with (default python3, 3.11 or newer).
set -eu
# only what is installed counts: a checkout on PYTHONPATH would pass for an installed fieldguide
unset PYTHONPATH
compile=--compile
extras=
while [ $# -gt 0 ]; do
    case $1 in
    --no-bytecode)
        compile=--no-compile
        export PYTHONDONTWRITEBYTECODE=1 # nor by the checks below
        ;;
    --fleet) extras="[fleet]" ;;
    *) break ;;
    esac
    shift
done
if [ $# -ne 3 ]; then
    echo "usage: $0 [--no-bytecode] [--fleet] VENV WHEEL MODEL_DIR" >&2
    exit 2
fi
venv=$1 wheel=$2 model=$3
for f in model_int8.onnx tokenizer.json manifest.json; do
    if [ ! -f "$model/$f" ]; then
        echo "$0: $model/$f is missing: export the model first (make setup, or python -m index.onnx_model DIR)" >&2
        exit 1
    fi
done
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --no-input "$compile" "$wheel$extras"
# the runtime must not have pulled torch in (a dependency that needs it would make the image GBs)
if "$venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"; then
    echo "$0: torch was installed into $venv; the runtime must not need it" >&2
    exit 1
fi
target="$venv/share/fieldguide/onnx-model"
mkdir -p "$target"
cp "$model/model_int8.onnx" "$model/tokenizer.json" "$target/"
cp "$model/manifest.json" "$target/"  # last: a manifest means a complete model folder
"$venv/bin/fieldguide" --help >/dev/null
echo "runtime installed in $venv"
