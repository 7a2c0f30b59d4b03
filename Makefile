# Axle: set-up, run, test and bench entry points. A fresh machine needs only `make run` or
# `make test`; both install what is missing first (`make deps`, see .ci/deps).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))

# Reference data (HLO corpus, baselines) that tests read; ../shared beside the repository by default.
export AXLE_SHARED ?= $(abspath $(ROOT)/../shared)
# LLVM 19 for inkwell; .cargo/config.toml points LLVM_SYS_191_PREFIX at the same place.
export LLVM_PREFIX ?= /usr/lib/llvm-19
# NVIDIA's PTX assembler, which .ci/deps installs from pip (nvidia-cuda-nvcc-cu12) for the nvptx
# backend's tests (tests/nvptx_ptxas.rs); the same place .ci/deps puts it. The same pip package
# ships libdevice (nvvm/libdevice/libdevice.10.bc), which the nvptx backend finds beside the real
# ptxas for math functions (or at $AXLE_LIBDEVICE); outside make it finds both in this folder too.
export AXLE_TOOLS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/axle
export AXLE_PTXAS ?= $(AXLE_TOOLS)/cuda-nvcc-12.9.86/ptxas

# A rustup toolchain that is installed but not on PATH (non-login shells, CI).
ifneq ($(wildcard $(HOME)/.cargo/bin/cargo),)
ifeq ($(findstring $(HOME)/.cargo/bin,$(PATH)),)
export PATH := $(HOME)/.cargo/bin:$(PATH)
endif
endif

CARGO ?= cargo
# CI checks that Cargo.lock is committed and up to date.
LOCKED := $(if $(CI),--locked)
EXAMPLE ?= examples/mlp.hlo
# What `make run` does with the example: run it on the default backend with generated inputs.
RUN_ARGS ?= run $(EXAMPLE)

# The Python package: a venv with what the wheel's tests need (from PyPI), the wheel built by
# maturin (release) and installed into it. PYTHON is the interpreter the venv is made from.
PYTHON ?= python3
PY_VENV ?= $(ROOT)/target/python-venv
PY_REQS := maturin numpy pytest ml_dtypes absl-py gymnasium jax==0.10.2 jaxlib==0.10.2
# The Cargo profile of the wheel: `release` for `make python`; `make test` builds its wheel with
# `dev`, which shares the test build's dependencies and skips a second optimized build of the
# whole compiler (the generated code is optimized by LLVM either way; pytest takes seconds).
PY_PROFILE ?= release
# Extra Cargo features of the wheel's build, as `crate/feature` of its dependencies. `make test`
# builds its wheel with the `axle` crate's default features (its CLI's crates and MPI), the
# feature set `cargo test --workspace` resolves for every crate below the wheel's own, so the
# wheel's build links what the test build compiled instead of compiling the compiler a second
# time with other features. The Python code and the compiler it reaches are the same.
PY_FEATURES ?=

# The steps of `make test`, in order; each is also a target of its own.
FMT_CHECK = $(strip $(CARGO) fmt --all --check)
# DESIGN.md: no import circles between the files of a crate.
IMPORTS = $(strip $(PYTHON) .ci/import-circles)
CLIPPY = $(strip $(CARGO) clippy $(LOCKED) --workspace --all-targets -- -D warnings)
# `make test` lints and builds in one compile: the workspace's crates go through .ci/clippy-rustc
# (clippy-driver, i.e. rustc plus Clippy's lints, warnings denied), which makes the test binaries
# and gives Clippy's verdict on every target (`--all-targets`: libraries, binaries, tests,
# benches, examples), where `cargo clippy` would be a second, check-only compile of the whole
# workspace. Every later step of `make test` (and .ci/fuzz-smoke) builds with the same wrapper,
# so it reuses these artifacts.
LINT_WRAPPER := $(ROOT)/.ci/clippy-rustc
LINT_BUILD = $(strip $(CARGO) test $(LOCKED) --workspace --all-targets --no-run)
UNIT = $(strip $(CARGO) test $(LOCKED) --workspace)
DOC = $(strip RUSTDOCFLAGS="-D warnings" $(CARGO) doc $(LOCKED) --workspace --no-deps)
PYTEST = $(strip $(PY_VENV)/bin/python -m pytest -q python/tests)
# JAX through the PJRT plugin: our suite (python/tests_pjrt) and one of JAX's own test files from
# the shared data, three parameter draws per test (about 250 tests in all).
PYTEST_JAX = $(strip JAX_PLATFORMS=axle JAX_NUM_GENERATED_CASES=3 PYTHONDONTWRITEBYTECODE=1 \
	$(PY_VENV)/bin/python -m pytest -q -p no:cacheprovider python/tests_pjrt \
	$(AXLE_SHARED)/jaxtests/lax_numpy_reducers_test.py)

# $(call step,NAME,COMMAND): echo COMMAND, run it, then print its wall time (and append it to the
# file $$STEP_TIMES when set; .ci/run's summary reads it).
define step
@t0=$$(date +%s); echo '+ $(2)'; $(2); t="$(1): $$(( $$(date +%s) - t0 ))s"; echo "== $$t"; \
	if [ -n "$${STEP_TIMES:-}" ]; then echo "$$t" >>"$$STEP_TIMES"; fi
endef

.PHONY: help deps build run test fmt fmt-check import-circles clippy unit doc pytest python bench clean

help:
	@echo 'make run     install what is missing, build release, run axle on $(EXAMPLE)'
	@echo 'make test    install what is missing, then fmt check, clippy, tests and docs (what CI runs)'
	@echo 'make deps    install what is missing (LLVM 19, Rust toolchain, rustfmt, clippy)'
	@echo 'make bench   divan benches: parse/verify/print (axle-ir), simplify at scale (axle-bench)'
	@echo 'make fmt     format the workspace'
	@echo 'make python  build the axle Python package (wheel) into a venv at $(PY_VENV)'
	@echo 'steps of make test: fmt-check import-circles clippy+build unit doc python pytest pytest-jax'
	@echo 'AXLE_SHARED=$(AXLE_SHARED)'

deps:
	@LLVM_PREFIX='$(LLVM_PREFIX)' '$(ROOT)/.ci/deps'

build: deps
	$(strip $(CARGO) build $(LOCKED) --release --bin axle)

run: build
	$(strip $(CARGO) run $(LOCKED) --release --bin axle -- $(RUN_ARGS))

test: export RUSTC_WORKSPACE_WRAPPER := $(LINT_WRAPPER)
test: deps
	$(call step,fmt-check,$(FMT_CHECK))
	$(call step,import-circles,$(IMPORTS))
	$(call step,clippy+build,$(LINT_BUILD))
	$(call step,unit,$(UNIT))
	$(call step,doc,$(DOC))
	$(call step,python,$(MAKE) python PY_PROFILE=dev PY_FEATURES=axle/default)
	$(call step,pytest,$(PYTEST))
	$(call step,pytest-jax,$(PYTEST_JAX))

fmt-check: deps
	$(FMT_CHECK)
import-circles:
	$(IMPORTS)
clippy: deps
	$(CLIPPY)
unit: deps
	$(UNIT)
doc: deps
	$(DOC)
pytest:
	$(MAKE) python PY_PROFILE=dev PY_FEATURES=axle/default
	$(PYTEST)
	$(PYTEST_JAX)

# The venv is made once and its packages installed when missing; the wheel is rebuilt by cargo's
# own change tracking and reinstalled every time.
python: deps
	@[ -x '$(PY_VENV)/bin/python' ] || $(PYTHON) -m venv '$(PY_VENV)'
	@'$(PY_VENV)/bin/python' -c 'import maturin, numpy, pytest, ml_dtypes, jax, absl, gymnasium' 2>/dev/null \
		|| '$(PY_VENV)/bin/python' -m pip install -q --disable-pip-version-check $(PY_REQS)
	rm -f '$(ROOT)'/target/wheels/axle-*.whl
	$(strip '$(PY_VENV)/bin/maturin' build --profile $(PY_PROFILE) $(LOCKED) -q -m python/Cargo.toml \
		$(if $(PY_FEATURES),--features $(PY_FEATURES)) \
		--compatibility linux --auditwheel skip \
		-i '$(PY_VENV)/bin/python' -o '$(ROOT)/target/wheels')
	'$(PY_VENV)/bin/python' -m pip install -q --disable-pip-version-check --force-reinstall \
		--no-deps '$(ROOT)'/target/wheels/axle-*.whl

fmt:
	$(CARGO) fmt --all

# Divan benches: parsing, verification and printing (ir/benches/) and the simplification
# pipeline at scale (bench/benches/). `axle bench FILE` measures compiled programs.
bench: deps
	$(strip $(CARGO) bench $(LOCKED) -p axle-ir -p axle-bench --benches)

clean:
	$(CARGO) clean
