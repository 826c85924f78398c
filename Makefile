# Two entry points for a fresh machine: `make demo` and `make test`. Both reuse .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_MODEL ?= zoo:resnet50
DEMO_OUT ?= out/demo/$(subst zoo:,,$(basename $(notdir $(DEMO_MODEL))))

.PHONY: setup demo test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[compare,test]"
	touch $(STAMP)

# transfer-tune a model held out of the shipped bank: the best record of each same-class bank kernel,
# at most 8 candidates per kernel, all measured; resumable, so a second run only prints the report
demo: $(STAMP)
	$(BIN)/schedrec replay --model $(DEMO_MODEL) --target native --top-n 1 --cap 8 --out $(DEMO_OUT)

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV) build *.egg-info
