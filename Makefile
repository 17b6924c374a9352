# Two commands on a fresh machine (README): `make demo` and `make test`.
# Each creates .venv if missing and installs the package with the exact tested versions of its
# dependencies (constraints.txt; pyproject.toml holds compatible ranges); the install is redone
# only when pyproject.toml or constraints.txt changes (the stamp file).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install chromium demo test test-slow test-tfds lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Headless Chromium from Debian's packages, for the leaderboard page's browser test (sudo unless root).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
chromium:
	command -v chromium >/dev/null || ($(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver)

# SLURM and munge from Debian's packages, for the sweep's SLURM backend test (tests/test_sweep_slurm.py
# starts its own one-node cluster on 127.0.0.1 from them; no system service is configured or used).
.PHONY: slurm
slurm:
	test -x /usr/sbin/slurmctld -a -x /usr/sbin/slurmd -a -x /usr/sbin/munged -a -x /usr/bin/sbatch || \
	  ($(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge)

demo: install
	$(BIN)/offline_gitd demo

test: install chromium slurm
	$(BIN)/python -m pytest

test-slow: install
	$(BIN)/python -m pytest -m slow

# The optional TFDS read path (tensorflow-cpu + tensorflow-datasets, ~3 GB) in its own venv, so the
# main one stays TensorFlow-free; tests/test_rlu_tfds.py skips itself where TFDS is not installed.
TFDS_VENV := .venv-tfds
TFDS_STAMP := $(TFDS_VENV)/.installed-stamp

$(TFDS_STAMP): pyproject.toml constraints.txt
	test -x $(TFDS_VENV)/bin/python || $(PYTHON) -m venv $(TFDS_VENV)
	$(TFDS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[tfds,dev]'
	touch $(TFDS_STAMP)

test-tfds: $(TFDS_STAMP)
	$(TFDS_VENV)/bin/python -m pytest tests/test_rlu_tfds.py tests/test_rlu.py

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) $(TFDS_VENV) .pytest_cache build *.egg-info
