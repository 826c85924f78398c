# Two entry points for a fresh machine: `make demo` and `make test`. Both reuse .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_MODEL ?= zoo:resnet50
DEMO_OUT ?= out/demo/$(subst zoo:,,$(basename $(notdir $(DEMO_MODEL))))

.PHONY: setup demo test test-fast bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[compare,test,cluster]"
	touch $(STAMP)

# budgeted transfer of a model held out of the shipped bank: the shipped ranker picks each kernel's top
# DEMO_K transferred schedules, only those are measured; then the summary against untuned, the shipped
# exhaustive replay and PyTorch. Resumable: a second run only compiles and prints.
DEMO_K ?= 2
demo: $(STAMP)
	$(BIN)/schedrec transfer --model $(DEMO_MODEL) --target native --budget-per-kernel $(DEMO_K) --baselines \
		--out $(DEMO_OUT)

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not bench" --durations=25 tests

# the bench tier, minutes each: whole measurement scripts end to end (the latency table, compare's every method),
# the cluster matrices (a worker killed; timed through RPC), bank tune on a cluster, a replay from a bank URL,
# SIGTERM during tuning and during a matrix
test-bench: $(STAMP)
	$(BIN)/python -m pytest -q -m bench tests

# the fast tier: no tuning, no whole-model compiles (under 3 minutes)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

clean:
	rm -rf $(VENV) build *.egg-info
