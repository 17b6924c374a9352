# Two commands on a fresh machine (README): `make demo` and `make test`.
# Each creates .venv if missing and installs the package with the exact tested versions of its
# dependencies (constraints.txt; pyproject.toml holds compatible ranges); the install is redone
# only when pyproject.toml or constraints.txt changes (the stamp file). uv installs them: the same
# versions pip resolves, downloaded in parallel (about 25 s into an empty venv with no cache, against
# about 150 s for pip), which is most of the margin `make test` has under 10 minutes on a fresh machine.
# --compile-bytecode writes every dependency's .pyc at install time: where PYTHONDONTWRITEBYTECODE is
# set (as on some CI machines) Python would otherwise compile JAX, Ray and the rest from source in
# every process it starts, and the test suite starts hundreds (xdist workers, CLI runs, Ray workers).
# PYTHONDONTWRITEBYTECODE is not passed to the recipes: the package's and the tests' own bytecode
# (and pytest's rewritten test modules) is then compiled once and read by every later process,
# instead of compiled again in each (collecting the suite took 19 s per worker with it set, 6 s
# without). The bytecode lands in __pycache__ folders, which git ignores.
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install chromium demo test test-fast test-slow test-tfds lint docs clean device-kit

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Headless Chromium from Debian's packages, for the leaderboard page's browser test (sudo unless root).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
chromium:
	command -v chromium >/dev/null || ($(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver)

# SLURM and munge from Debian's packages, for the sweep's SLURM backend test (tests/sweeps/test_sweep_slurm.py
# starts its own one-node cluster on 127.0.0.1 from them; no system service is configured or used).
.PHONY: slurm
slurm:
	test -x /usr/sbin/slurmctld -a -x /usr/sbin/slurmd -a -x /usr/sbin/munged -a -x /usr/bin/sbatch || \
	  ($(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge)

demo: install
	$(BIN)/offline_gitd demo

# What sweeps/gpu_cells.sh takes to a GPU machine that has JAX for CUDA but no package index
# (docs/online.md#whole-cells-on-a-gpu): HEAD as a git bundle, and as wheels for its Python
# (DEVICE_PYTHON, 3.12 by default) the packages a MinAtar online run imports that such a machine
# lacks, at the versions constraints.txt pins. About 12 MB.
DEVICE_PYTHON ?= 3.12
DEVICE_WHEELS := ale-py gymnasium farama-notifications minatar pgx pgx-minatar pytz svgwrite tensorboardX
device-kit: install
	rm -rf .device && mkdir -p .device/whl
	git bundle create .device/code.bundle HEAD
	$(BIN)/python -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
	  --python-version $(DEVICE_PYTHON) --implementation cp --platform manylinux_2_28_x86_64 \
	  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  -d .device/whl $(foreach name,$(DEVICE_WHEELS),$(shell grep -i '^$(name)==' constraints.txt))
	du -sh .device

# Tests run on every core (pytest-xdist), a test file per worker so module fixtures are built once.
PYTEST := $(BIN)/python -m pytest -n auto --dist loadfile

# The default run (all but `slow`): what CI runs.
test: install chromium slurm
	$(PYTEST)

# The default run less what starts a Ray cluster, drives Chromium or trains end to end: the quick
# check while editing.
test-fast: install
	$(PYTEST) -m "not slow and not e2e and not ray and not browser and not slurm"

# XLA_FLAGS empty: the real-scale runs compile with XLA's full optimisation, as users' runs do (the
# default run compiles at -O0, tests/conftest.py, where compiling outweighs running). Then the
# property tests with a thousand examples each, five times the default run's (tests/conftest.py).
test-slow: install
	XLA_FLAGS= $(BIN)/python -m pytest -m slow
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-thorough} $(BIN)/python -m pytest -n auto --dist loadfile tests/properties

# The optional TFDS read path (tensorflow-cpu + tensorflow-datasets, ~3 GB) in its own venv, so the
# main one stays TensorFlow-free; tests/data/test_rlu_tfds.py skips itself where TFDS is not installed.
TFDS_VENV := .venv-tfds
TFDS_STAMP := $(TFDS_VENV)/.installed-stamp

$(TFDS_STAMP): pyproject.toml constraints.txt
	test -x $(TFDS_VENV)/bin/python || $(PYTHON) -m venv $(TFDS_VENV)
	$(TFDS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[tfds,dev]'
	touch $(TFDS_STAMP)

test-tfds: $(TFDS_STAMP)
	$(TFDS_VENV)/bin/python -m pytest tests/data/test_rlu_tfds.py tests/data/test_rlu.py

# ruff (style) and import-linter (the floors in pyproject.toml: nothing below imports from above).
lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports

# The documentation site (docs/, mkdocs.yml) into site/. --strict turns every warning (a broken
# link or anchor, a missing page, an API object that does not resolve) into a failure. The build
# needs no network. NO_MKDOCS_2_WARNING silences Material's banner about MkDocs' future.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) $(TFDS_VENV) .pytest_cache build site *.egg-info
