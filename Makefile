# The two commands the README opens with. Both create ./.venv from scratch when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-all lint typecheck docs bench clean

$(BIN)/camel-jax: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(BIN)/camel-jax
	$(BIN)/camel-jax demo

# the suite first, then the notebooks at CI size as a step of their own (issue 57)
test: $(BIN)/camel-jax typecheck docs
	$(BIN)/python -m pytest -m "not slow" -q -n 2 --dist load --durations=15 --deselect tests/test_notebooks.py
	$(BIN)/python -m pytest -m "not slow" -q -n 2 --dist load --durations=5 tests/test_notebooks.py

test-all: $(BIN)/camel-jax
	$(BIN)/python -m pytest -q

typecheck: $(BIN)/camel-jax
	$(BIN)/mypy

# the site, strictly (a broken link or an unresolved API entry fails); offline: no fonts or plugins from the net
docs: $(BIN)/camel-jax
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site  # not --quiet: it hides the warnings strict counts

lint: $(BIN)/camel-jax
	$(BIN)/ruff check camel_jax tests benchmarks notebooks

bench: $(BIN)/camel-jax
	$(BIN)/python benchmarks/bench_fit.py

clean:
	rm -rf $(VENV) camel-demo .pytest_cache build/site
