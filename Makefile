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

# The steps of `make test`, in order; each is also a target of its own.
FMT_CHECK = $(strip $(CARGO) fmt --all --check)
CLIPPY = $(strip $(CARGO) clippy $(LOCKED) --workspace --all-targets -- -D warnings)
UNIT = $(strip $(CARGO) test $(LOCKED) --workspace)
DOC = $(strip RUSTDOCFLAGS="-D warnings" $(CARGO) doc $(LOCKED) --workspace --no-deps)

# $(call step,NAME,COMMAND): echo COMMAND, run it, then print its wall time (and append it to the
# file $$STEP_TIMES when set; .ci/run's summary reads it).
define step
@t0=$$(date +%s); echo '+ $(2)'; $(2); t="$(1): $$(( $$(date +%s) - t0 ))s"; echo "== $$t"; \
	if [ -n "$${STEP_TIMES:-}" ]; then echo "$$t" >>"$$STEP_TIMES"; fi
endef

.PHONY: help deps build run test fmt fmt-check clippy unit doc bench clean

help:
	@echo 'make run     install what is missing, build release, run axle on $(EXAMPLE)'
	@echo 'make test    install what is missing, then fmt check, clippy, tests and docs (what CI runs)'
	@echo 'make deps    install what is missing (LLVM 19, Rust toolchain, rustfmt, clippy)'
	@echo 'make bench   divan benches: parse/verify/print (axle-ir), simplify at scale (axle-bench)'
	@echo 'make fmt     format the workspace'
	@echo 'steps of make test: fmt-check clippy unit doc'
	@echo 'AXLE_SHARED=$(AXLE_SHARED)'

deps:
	@LLVM_PREFIX='$(LLVM_PREFIX)' '$(ROOT)/.ci/deps'

build: deps
	$(strip $(CARGO) build $(LOCKED) --release --bin axle)

run: build
	$(strip $(CARGO) run $(LOCKED) --release --bin axle -- $(RUN_ARGS))

test: deps
	$(call step,fmt-check,$(FMT_CHECK))
	$(call step,clippy,$(CLIPPY))
	$(call step,unit,$(UNIT))
	$(call step,doc,$(DOC))

fmt-check: deps
	$(FMT_CHECK)
clippy: deps
	$(CLIPPY)
unit: deps
	$(UNIT)
doc: deps
	$(DOC)

fmt:
	$(CARGO) fmt --all

# Divan benches: parsing, verification and printing (ir/benches/) and the simplification
# pipeline at scale (bench/benches/). `axle bench FILE` measures compiled programs.
bench: deps
	$(strip $(CARGO) bench $(LOCKED) -p axle-ir -p axle-bench --benches)

clean:
	$(CARGO) clean
