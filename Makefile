# wanbench: `make demo` runs the main job, `make test` runs every test. Both install what is missing.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := build/bin
ASANBIN := build/asan/bin

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE
ASANFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

.DEFAULT_GOAL := all
.PHONY: all deps system-deps python-deps demo test test-flaky test-chaos test-hostile lint bench clean

# Each part brings its own build rules, binaries and bench target.
BINARIES :=
include servers/build.mk
include clients/build.mk
include topologies/build.mk
include harness/ktrace/build.mk

all: $(BINARIES)

system-deps:
	@bash scripts/setup-system.sh

# The package's bytecode, written here because imports may not write it: with
# PYTHONDONTWRITEBYTECODE set (this machine's environment sets it) every wanbench process
# would compile harness/ and clients/ again, and the suite starts hundreds of them.
python-deps: $(VENV)/.installed
	@$(PY) -m compileall -q -j 0 harness clients
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev,fast]'
	@touch $@

deps: system-deps python-deps

# The demo prints its table and exits 1 if a point × repetition stays invalid (each listed with
# its reason). Late sends while other tasks or the hypervisor held the generator's CPU are
# interference, measured again (wb-whoran traces who held it; docs/validity.md);
# docs/bench-demo.md shows three fresh clones' runs (make bench-demo).
demo: deps all
	$(VENV)/bin/wanbench run scenarios/quickstart.yaml

# Tests that start no load and measure no time (the `beside` mark: tests/conftest.py's BESIDE)
# run on both CPUs, and the guests' boots (the `guest` mark) beside them: an emulated CPU's
# timings mean nothing, and its one emulator thread would otherwise hold the machine for
# minutes alone. The rest run one test at a time, as real loads, namespaces and `timing`
# tests need the machine to themselves. Every part runs; any fails it. The parts share one
# cache apart from the user's (tests/conftest.py): a probe's answer is found, not probed again.
test: deps all
	@bash scripts/setup-system.sh test
	@status=0; guests=$$(mktemp); export WANBENCH_TEST_CACHE=$$(mktemp -d); \
	$(PY) -m pytest -q -p no:cacheprovider --durations=5 -m "guest and not beside" tests \
		>$$guests 2>&1 & guest_pid=$$!; \
	$(PY) -m pytest -q -n 2 --durations=10 -m "beside and not guest" tests || status=$$?; \
	wait $$guest_pid || status=$$?; cat $$guests; rm -f $$guests; \
	$(PY) -m pytest -q --durations=25 -m "not beside and not guest" tests || status=$$?; \
	rm -rf "$$WANBENCH_TEST_CACHE"; exit $$status

# Every `timing` test 20 times beside the rest of the suite, then the guests' tests (a boot
# of about 4 minutes each under TCG): each must pass 20 of 20.
test-flaky: deps all
	$(PY) scripts/test_flaky.py --runs 20
	$(PY) scripts/test_flaky.py --runs 20 --mark guest

# 20 SIGKILLs of a budgeted dumbbell-wan sweep, topo clean and --resume (root): no process,
# namespace, cgroup or ledger left, no point lost, nothing outside the run directory touched.
test-chaos: deps all
	$(PY) scripts/chaos_kill.py --kills 20 --probe-kills 6

# Hostile scenario files and --sets through `wanbench run`, damaged run directories through
# every command that reads runs: each refused at once in one line.
test-hostile: deps all
	$(PY) scripts/chaos_hostile.py
	$(PY) scripts/chaos_damaged.py

lint: python-deps
	$(VENV)/bin/ruff check harness clients tests

bench: bench-servers bench-clients bench-wan bench-runner bench-analysis bench-cluster bench-ktrace bench-ktrace-hooks bench-demo bench-window

clean:
	rm -rf build

.PHONY: bench-analysis bench-runner bench-cluster bench-demo bench-window reproduce reproduce-quick beyond
# Every reproduction target at the papers' axes, 3 repetitions, from one clean revision, into
# results/reference (committed); then each target's verdict into REPRODUCTION.md, and figures.
reproduce: deps all
	$(VENV)/bin/wanbench reproduce --run --prune-raw --check results/reference \
	  --write-status REPRODUCTION.md; test $$? -le 1
	$(VENV)/bin/wanbench plot --figures papers results/reference

# The sweeps beyond the papers (harness/reproduce/beyond.py) into results/reference beside the
# papers' runs, which they keep; then REPRODUCTION.md's checks and findings, and figures.
beyond: deps all
	$(VENV)/bin/wanbench reproduce --run --prune-raw --beyond --check results/reference \
	  --write-status REPRODUCTION.md; test $$? -le 1

# The same pipeline on one short point per scenario (a smoke test, not a reproduction).
reproduce-quick: deps all
	$(VENV)/bin/wanbench reproduce --run --quick --allow-dirty --check build/reproduce-quick; \
	  test $$? -le 1


bench-analysis: python-deps
	$(PY) scripts/bench_analysis.py

bench-runner: python-deps
	$(PY) scripts/bench_samplers.py

# `make demo` from 3 fresh clones of this branch in a row, each inside BENCH_WRAP (e.g. a lock
# that holds the machine): results/bench/bench-demo/, then docs/bench-demo.md.
BENCH_WRAP ?=
bench-demo: python-deps
	$(PY) scripts/bench_demo.py --clones 3 --wrap '$(BENCH_WRAP)'

# The saturation sweeps (BM98 Figs 3-6, BMD99 Fig 9, CM01 Figs 6-9) once each, traced, audited
# against the window's promises (steady state, the offered load, one clock, every source's
# edges): results/bench/window/, then docs/bench-window.md.
bench-window: deps all
	$(PY) scripts/window_audit.py --wrap '$(BENCH_WRAP)'

# The coordination overhead of `wanbench run --cluster` on a namespace cluster (root, the
# cluster extra): docs/bench-cluster.md, its run kept under results/bench/bench-cluster/.
bench-cluster: python-deps all
	$(PY) scripts/bench_cluster.py
