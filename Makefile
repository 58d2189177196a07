# jobreport — two commands on a fresh Debian 12 machine, as root: `make demo`, `make test`.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test stack stop lint unit bench clean

demo: stack ## install and start the local stack, run sample jobs, print their reports
	scripts/demo

test: stack ## lint, then every test (unit and integration on the real stack)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest -q

stack:
	scripts/dev-stack start

stop:
	scripts/dev-stack stop

lint:
	$(VENV)/bin/ruff check .

unit: ## the tests that need no stack
	$(VENV)/bin/pytest -q -m "not stack"

bench: stack
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) var test-artifacts
