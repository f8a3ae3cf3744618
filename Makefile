# marl: the two commands a fresh machine needs are `make train` and `make test` (`make docs`: the manual).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BOARD_VENV ?= .venv-board
MAP ?= 3m
RESULTS ?= results
PORT ?= 8080
# test processes for `make test` / `make test-fast` (pytest-xdist; 1 runs the suite in this process alone)
TEST_WORKERS ?= 2
XDIST := $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

.PHONY: venv venv-test kernels train test test-fast test-external coverage lint tables docs docs-serve bench bench-env bench-step bench-throughput bench-fidelity bench-interop torchrl-env board board-env board-stop clean

# Installs into $(VENV): with uv (pip-installed into the venv first, a few seconds), which builds the test
# venv several times faster than pip; pip does it where uv cannot be installed or fails (uv reads no
# pip.conf: an index set only there is pip's alone). USE_UV=0: pip alone. uv compiles the bytecode as pip
# does (--compile-bytecode): where PYTHONDONTWRITEBYTECODE is set, a venv without it compiles every module
# it imports again in each process (docs/testing.md, "What the suite's time is made of").
USE_UV ?= 1
UV_BIN := $(VENV)/bin/uv
pip_install = $(if $(filter 1,$(USE_UV)),{ test -x $(UV_BIN) && $(UV_BIN) pip install -q --compile-bytecode --python $(PY) $(1); } || ,)$(PY) -m pip install -q $(1)

# The virtual environment is (re)built whenever pyproject.toml changes: `make train` installs what training
# needs (the `train` extra); `make test` adds the test tools, the game client, Ray, the report statistics,
# MkDocs (tests/test_docs.py builds the manual in strict mode) and imageio-ffmpeg (the MP4 replay test).
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(filter 1,$(USE_UV)),$(PY) -m pip install -q uv || echo "no uv: pip installs the venv")
	$(call pip_install,--upgrade pip)
	$(call pip_install,-e ".[train]")
	touch $@

TEST_EXTRAS := train,test,sc2,ray,report,docs,replay
$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(call pip_install,-e ".[$(TEST_EXTRAS)]")
	$(call pip_install,--no-deps "pysc2==4.0.0")
	touch $@

venv: $(VENV)/.installed

venv-test: $(VENV)/.installed-test

# The compiled CPU kernels (marl/kernels/*.cc, cached under marl/kernels/_build); without a C++ compiler the
# library falls back to its MindSpore reference path and says so in one line.
kernels: venv
	$(PY) -m marl.kernels

ALG ?= qmix
train: kernels
	$(PY) -m marl train --alg $(ALG) --map $(MAP)

# The test tiers (docs/testing.md; tests/conftest.py gives each test one): `make test` runs every tier but
# external (what CI runs), `make test-fast` the unit tier alone (budget 90 s). The suite writes Python's
# bytecode caches even where the environment sets PYTHONDONTWRITEBYTECODE: without them every worker of
# every run rewrites the asserts of every test module again (collection 13.6-14.0 s against 7.2-8.1 s).
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest
test: venv-test kernels
	$(PY) -m ruff check marl scripts tests benchmarks
	$(PY) -m ruff format --check marl scripts tests benchmarks
	$(PYTEST) -q $(XDIST) -m "not external" --durations=15

test-fast: venv-test kernels
	$(PYTEST) -q $(XDIST) -m unit --durations=5

# Line coverage of marl/ (pytest-cov) over the `make test` selection, or one tier (`make coverage
# COVERAGE_TIERS=unit`): a report in the terminal and in coverage.xml (git ignores both it and .coverage).
# Code run only in a subprocess a test starts is not counted.
COVERAGE_TIERS ?= not external
coverage: venv-test kernels
	$(PYTEST) -q $(XDIST) -m "$(COVERAGE_TIERS)" --cov=marl --cov-report=term --cov-report=xml

# The external tier: the real game (scripts/install_sc2.sh) and MindInsight (make board-env); skips what is absent.
test-external: venv-test kernels
	$(PYTEST) -q -m external -rs

lint: venv-test
	$(PY) -m ruff check marl scripts tests benchmarks
	$(PY) -m ruff format --check marl scripts tests benchmarks

# The README's results blocks, regenerated from benchmarks/results/ (tests/test_readme_tables.py checks them).
tables: venv-test
	$(PY) scripts/report.py --readme

# The manual (docs/, mkdocs.yml) as a site in site/, in strict mode: a broken link or page fails the build.
$(VENV)/.installed-docs: pyproject.toml $(VENV)/.installed
	$(call pip_install,-e ".[docs]")
	touch $@

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-serve: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

# JAX needs numpy 2, MindSpore numpy < 2: JaxMARL's SMAX (the throughput peer) and the JAX learner step
# (benchmarks/learner_step/jax_qmix_step.py) live in their own venv. jax 0.10.2 is the newest release for
# Python 3.11 (0.11 and later need Python >= 3.12); the stamp names the version, so changing it reinstalls.
BENCH_VENV ?= .venv-bench
JAX_VERSION ?= 0.10.2
$(BENCH_VENV)/.installed-jax$(JAX_VERSION):
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q "jax==$(JAX_VERSION)" "jaxlib==$(JAX_VERSION)" "numpy>=2" jaxmarl
	touch $@

bench-env: venv-test $(BENCH_VENV)/.installed-jax$(JAX_VERSION)

# The QMIX learner step: MindSpore vs PyTorch eager, torch.compile (torch 2.13 CPU, the `bench` extra) and JAX
# at the 3m, 8m and 27m_vs_30m sizes; the JAX and torch.compile layouts are screened first and the fastest of
# each runs (learner_step.py --help). Every contender is pinned to one CPU; pause other jobs for a result.
STEP_ARGS ?=
bench-step: bench-env
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) benchmarks/learner_step/learner_step.py --jax-python $(BENCH_VENV)/bin/python $(STEP_ARGS)

# TorchRL (torch 2.13 CPU) with this package's engine-only install (no MindSpore), for
# benchmarks/interop/torchrl_mappo.py.
TORCHRL_VENV ?= .venv-torchrl
$(TORCHRL_VENV)/.installed: pyproject.toml
	test -x $(TORCHRL_VENV)/bin/python || $(PYTHON) -m venv $(TORCHRL_VENV)
	$(TORCHRL_VENV)/bin/python -m pip install -q --upgrade pip
	$(TORCHRL_VENV)/bin/python -m pip install -q "torch==2.13.0" "torchrl==0.14.1" -e .
	touch $@

torchrl-env: $(TORCHRL_VENV)/.installed

# The suites of benchmarks/ (benchmarks/README.md), one target each; `make bench` runs the four. The learning
# suite and the research studies are run one script at a time (each script's --help).
bench-throughput: bench-env
	$(PY) benchmarks/throughput/sim_throughput.py
	$(PY) benchmarks/throughput/sim_paired.py
	$(PY) benchmarks/throughput/smac_api_step.py

bench-fidelity: venv-test
	$(PY) benchmarks/fidelity/fidelity.py

bench-interop: torchrl-env
	$(TORCHRL_VENV)/bin/python benchmarks/interop/torchrl_mappo.py --map 3m --frames 400000 --budget-s 1200

bench: bench-step bench-throughput bench-fidelity bench-interop

# MindInsight 2.3.1 pins protobuf 3.20, which breaks mindspore 2.10: it lives in its own venv.
$(BOARD_VENV)/.installed:
	test -x $(BOARD_VENV)/bin/python || $(PYTHON) -m venv $(BOARD_VENV)
	$(BOARD_VENV)/bin/python -m pip install -q --upgrade pip
	$(BOARD_VENV)/bin/python -m pip install -q "mindinsight==2.3.1"
	touch $@

board-env: $(BOARD_VENV)/.installed

board: board-env
	BOARD_VENV=$(BOARD_VENV) bash scripts/board.sh start $(RESULTS) $(PORT)

board-stop:
	BOARD_VENV=$(BOARD_VENV) bash scripts/board.sh stop $(RESULTS) $(PORT)

clean:
	rm -rf $(VENV) $(BOARD_VENV) $(BENCH_VENV) .pytest_cache .ruff_cache rank_0 marl/kernels/_build
