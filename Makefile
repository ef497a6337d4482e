# Two commands: `make demo` and `make test`. Each creates .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.hotseam-installed

.PHONY: demo test test-loaded test-stress lint typecheck unit collected docs bench stress interop browser-test clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "hotseam needs Python >= 3.11, found " + sys.version.split()[0])'
	@if test -x $(BIN)/python; then echo "updating .venv (pyproject.toml changed)"; \
	else echo "setting up .venv (about half a minute, first run only)"; fi
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	@$(BIN)/hotseam demo

# The type check (one core) runs beside a first collection of the tests on the other core,
# which leaves pytest's rewritten test modules in __pycache__: the three workers of `unit`
# then read them instead of each rewriting the same 200 modules (6 of the 13 CPU-seconds a
# worker's collection took with PYTHONDONTWRITEBYTECODE set, as in some CI images).
test: lint
	@$(MAKE) --no-print-directory -j 2 typecheck collected
	@$(MAKE) --no-print-directory unit

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

# Three workers on the 2-core machine: many tests wait on the processes they start, so a
# third worker fills the waits. The suite's cost is mostly those processes' Python start-up
# (about 11 CPU-minutes at load 3, more on a busier machine): the sources are compiled once first, since with
# PYTHONDONTWRITEBYTECODE set (as in some CI images) every process would compile hotseam
# again (0.3 s of CPU each). The tests marked `stress` (the short tortures, the fleet) are
# left out: `make test-stress` runs them, and the costly property tests (marked `examples`)
# with their full Hypothesis counts; CI runs both. Workers steal queued tests from each other
# (`--dist worksteal`), so the long tests do not all end up queued behind one worker at the
# end: 5 min 48 s of pytest at load 3, 654 CPU-seconds (2026-12-02).
unit: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 src tests >/dev/null
	$(PYTEST) -n 3 --dist worksteal -m "not stress"

# pytest writes the test modules it rewrote (their asserts) beside their bytecode, even where
# the environment asks Python to write none: compileall writes the rest anyway.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest

collected: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 src tests >/dev/null
	@$(PYTEST) --collect-only -q -p no:xdist -m "not stress" > $(VENV)/collected.log \
		|| (cat $(VENV)/collected.log; exit 1)

# What `make test` leaves out or runs short (CI runs it after `make test`, .ci/run): the
# tests marked `stress`, and those marked `examples` under the Hypothesis profile "stress"
# (4 times the examples of `make test`: tests/conftest.py). About 3 minutes on 2 cores.
test-stress: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 src tests >/dev/null
	$(PYTEST) -n 3 --dist worksteal -m "stress or examples" --hypothesis-profile=stress

# `make unit` on a busy machine: three busy processes per core beside the suite's own
# workers (load average near 8 on 2 cores) for as long as it runs (tests/_hog.py). Every
# deadline of the suite is stretched by the factor tests/_timing.py measures.
test-loaded: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 src tests >/dev/null
	$(BIN)/python tests/_hog.py -- $(PYTEST) -n 3 --dist worksteal -m "not stress"

# The documentation site (docs/ -> build/site/), warnings as errors: a broken link, anchor or
# cross-reference fails. Installs the pinned `docs` extra into .venv on first use.
DOCS_STAMP := $(VENV)/.hotseam-docs-installed

$(DOCS_STAMP): $(STAMP) pyproject.toml
	@echo "adding the documentation tools to .venv (first run only)"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,docs]'
	@touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean
	@echo "the site is in build/site/ (open build/site/index.html)"

bench: $(STAMP)
	$(BIN)/python bench/effects.py

# Reload torture (real files, the real watcher, 1,000 edits) on both backends; the daemon
# torture (carried values, the deletion grace, the watched folder replaced, moved and
# restored by git: 600 steps) on both backends, and against a real `hotseam run` with
# SIGHUP and its control socket hammered (200 steps); a flood of the control socket (1,100
# idle connections at a 1,024-file limit, 2,000 hostile lines), 100 saves of a module
# serving the web inbox under load (0 requests lost), the fleet torture (daemons and two
# racing inboxes on one journal, killed at random: 1,200 questions on PostgreSQL and on
# SQLite), 4 MCP host sessions through 1,000 edits of tool modules, the reload torture
# inside agent runs of an SQLite ask journal restarted every 25 edits (asks of one question:
# a multi-question ask cut by a restart is asked again whole, a known gap), then the stateful
# invariant suite with many examples, after `make test-stress`. Under 25 minutes on 2 cores.
stress: test-stress
	$(BIN)/python bench/torture.py --edits 1000 --backend asyncio
	$(BIN)/python bench/torture.py --edits 1000 --backend trio
	$(BIN)/python bench/torture_daemon.py --edits 600 --backend asyncio
	$(BIN)/python bench/torture_daemon.py --edits 600 --backend trio
	$(BIN)/python bench/torture_daemon.py --cli --edits 200
	$(BIN)/python bench/control_flood.py
	$(BIN)/python bench/web.py --reload --saves 100 --backend asyncio
	$(BIN)/python bench/web.py --reload --saves 100 --backend trio
	$(BIN)/python bench/fleet_torture.py --engine postgresql --outages 3
	$(BIN)/python bench/fleet_torture.py --engine sqlite
	$(BIN)/python bench/mcp_torture.py --edits 1000
	$(BIN)/python bench/torture.py --edits 1000 --journal sqlite --backend asyncio --several-ratio 0 --approvals 0
	$(BIN)/python bench/torture.py --edits 1000 --journal sqlite --backend trio --several-ratio 0 --approvals 0.2
	HOTSEAM_STATEFUL_EXAMPLES=2000 $(BIN)/pytest -n 2 -p no:cacheprovider tests/test_invariants.py -q

# The interop suites: `hotseam acp` against a Node client written on the official ACP
# TypeScript SDK (pinned, installed with npm into interop/node_modules), and `hotseam mcp`
# against the MCP Inspector's CLI and the official MCP conformance suite (interop/mcp/, on
# the npm package `node` 22, installed locally). Needs node and npm.
interop: $(STAMP)
	sh interop/run.sh

# The built sdist and wheel installed as users install them, outside the source tree, in
# throw-away virtual environments (.ci/wheel-check): twine check, the base install with no
# extra (every public module, --help, --version, a piped demo, the missing-extra lines),
# each extra's surface (acp initialize, mcp tools/list, the web page, a PostgreSQL journal),
# on each CPython 3.11+ found, and the lowest allowed versions on a subset of the suite.
.PHONY: wheel-check
wheel-check:
	$(PYTHON) .ci/wheel-check --lower-bounds

# The web inbox in a real headless Chromium (installed through apt when missing).
browser-test: $(STAMP)
	sh tests/browser/run.sh

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
