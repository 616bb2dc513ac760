# The README's two commands: `make run` and `make test`.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed

.PHONY: run test lint bench clean sysdeps

$(STAMP): requirements.txt
	@test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

sysdeps:
	@bash deploy/install-system-deps.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) sysdeps lint
	$(VENV)/bin/pytest

run: $(STAMP) sysdeps
	$(PY) deploy/run_demo.py

bench: $(STAMP) sysdeps
	$(PY) -m tests.bench.run_bench

clean:
	-$(PY) manage.py sandbox down
	rm -rf var
