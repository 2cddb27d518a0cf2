# Softmax at scale: the two commands of the README.
#   make book   set up .venv and the JS assets if needed, execute every notebook once, write _build/html
#   make test   the same, plus Chromium, then the whole pytest suite on that build
# Paper scale: XCLIB_SCALE=paper make book. Data: $XCLIB_DATA (see README), passed through.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LAB_STAMP := $(VENV)/.lab-installed

export NUMBA_CACHE_DIR ?= $(CURDIR)/_build/numba_cache
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: book test clean venv assets chromium lab lab-env lab-reset book-setup test-setup

book: book-setup
	$(VPY) tools/build.py

test: test-setup
	$(VPY) tools/build.py --keep-going
	$(VPY) -m pytest -n auto --dist loadfile

# the set-up steps side by side (npm downloads while uv installs); their logs stay whole
book-setup:
	@$(MAKE) --no-print-directory -j3 --output-sync=target venv assets

test-setup:
	@$(MAKE) --no-print-directory -j3 --output-sync=target venv assets chromium lab-env

venv: $(STAMP)

# (re)install when requirements.txt or pyproject.toml change
# uv (pinned in requirements.txt) installs the pinned wheels in seconds where pip takes minutes;
# pip builds the two packages PyPI ships only as sources (hnswlib, liblinear-official), because
# its wheel cache keeps the build between venvs and uv's does not survive the index's headers.
UV := $(VPY) -m uv pip install --python $(VPY) --quiet

$(STAMP): requirements.txt pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet -c requirements.txt uv hnswlib liblinear-official
	$(UV) -r requirements.txt
	$(UV) --no-deps -e .
	cp requirements.txt $(STAMP)

assets: node_modules/.installed

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --ignore-scripts
	touch $@

# headless Chromium for tests/book/test_book_html.py (Debian package; installed only as root)
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	else \
		echo "Chromium is missing: install it (Debian: apt-get install chromium) or set CHROMIUM=/path" >&2; \
	fi

# JupyterLab + jupyterlab-myst (requirements-lab.txt) for reading the notebooks, and for
# tests/book/test_lab_browser.py; `make lab` opens working copies in lab/ (git-ignored)
lab: lab-env
	$(VPY) tools/lab.py open $(LAB_ARGS)

lab-env: venv $(LAB_STAMP)

$(LAB_STAMP): requirements-lab.txt $(STAMP)
	$(UV) -r requirements-lab.txt
	cp requirements-lab.txt $@

# fresh working copies (all, or NB=01_unbiased_softmax); the old ones go to lab/.previous/
lab-reset: lab-env
	$(VPY) tools/lab.py reset $(NB)

clean:
	rm -rf _build
