# The two commands of the README: `make up` runs Astraeus, `make test` runs every check.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: up test check lint types unit bench screenshots lock clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# editable as a path on sys.path (compat): every `astra` call starts without the import
	# hook a default editable install runs in site (~8 ms of a 40 ms command); every
	# dependency at the version constraints.txt gives
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

up: $(STAMP)
	$(VENV)/bin/astra up

test: $(STAMP) lint types
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff format --check runner astraeus_tui tests bench
	$(VENV)/bin/ruff check runner astraeus_tui tests bench
	$(VENV)/bin/lint-imports

types: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) bench/bench_planner.py

screenshots: $(STAMP)
	$(PY) -m tests.tui.make_screenshots
	$(PY) docs/metrics-plot.py

# constraints.txt anew: the newest releases pyproject.toml's ranges allow, in a throwaway
# environment; then `make test`, and commit the refresh on its own
lock:
	rm -rf .lock-venv
	python3 -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet '.[dev]'
	sed -n '/^#/p' constraints.txt > constraints.new
	.lock-venv/bin/pip freeze --exclude astraeus >> constraints.new
	mv constraints.new constraints.txt
	rm -rf .lock-venv build

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
