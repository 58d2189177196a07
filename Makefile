# jobreport — two commands on a fresh Debian 12 machine, as root: `make demo`, `make test`.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test stack stop lint unit bench bench-scale dist image lock clean

# The demo leaves the VM clusters and the container image out (DEV_STACK_VMS=off,
# DEV_STACK_IMAGE=off): they add minutes it does not need.
demo: ## install and start the local stack, run sample jobs, print their reports
	DEV_STACK_VMS=off DEV_STACK_IMAGE=off scripts/dev-stack start
	scripts/demo

# Whole modules in tests/conftest.py's order (stack modules with jobs of their own first):
# xdist would otherwise start with the modules holding the most tests.
test: stack ## lint, then every test (unit and integration on the real stack)
	$(MAKE) lint
	$(VENV)/bin/pytest -q -n 4 --dist loadfile --no-loadscope-reorder --durations=15

stack: ## the local stack, the VM clusters (docs/platforms.md) and the container image
	scripts/dev-stack start

dist: ## the sdist and wheel (python -m build) and the runtime lock's files, in dist/
	scripts/build-dist

image: ## the report service's image from dist/ (podman; docs/deploying.md)
	scripts/image build

lock: ## requirements.txt and requirements/*.txt from pyproject.toml, with hashes (pip-compile)
	scripts/lock-deps

stop:
	scripts/dev-stack stop

lint: ## ruff, the import contracts, mypy ([tool.mypy]), bandit (high severity fails), pip-audit
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(VENV)/bin/bandit -q -r webapp jobs_exporter slurm_exporter mgmt jobreport_common --severity-level high
	scripts/audit-deps

unit: ## the tests that need no stack
	$(VENV)/bin/pytest -q -m "not stack"

bench: stack ## every benchmark; the web one on the newest completed job of the stack
	$(PY) bench/bench_sacct.py
	$(PY) bench/bench_exporter.py
	$(PY) bench/bench_report.py
	set -a; . var/jobreport.env; set +a; $(PY) bench/bench_history.py
	set -a; . var/jobreport.env; set +a; \
	  JOBREPORT_BENCH_JOB=$$(sacct -X -n -P -S now-7days --format=JobID,State | \
	    awk -F'|' '$$2 == "COMPLETED" && $$1 !~ /_/ {id = $$1} END {print id}') \
	  $(PY) bench/bench_web.py --duration 30
	$(MAKE) bench-scale

bench-scale: ## a week of a large site (700,000 jobs) and jobs of 10-1,000 nodes; no stack needed
	$(PY) bench/bench_scale.py --jobs 10000,100000,700000 --in-memory
	$(PY) bench/bench_many_nodes.py --nodes 10,100,1000 --per-node
	$(PY) bench/bench_digest.py --jobs 10000,100000 --runs 3
	$(PY) bench/bench_web_scale.py --jobs 700000 --clients 50 --duration 60

clean:
	rm -rf $(VENV) var test-artifacts dist
