# Two commands do everything on a fresh machine: `sudo make demo` and `sudo make test`.
# Without root, `make dev lint unit` sets up a venv with the C extension and checks the code.
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST := $(BIN)/python -m pytest
# The venv's interpreter: the system one, whose site packages hold Mininet (scripts/install.sh).
SYSTEM_PYTHON ?= /usr/bin/python3

.PHONY: install dev bpf ext fast pure demo cluster-demo test stock-kernel-test lint unit \
	integration bench schemas \
	docs transcripts clean distclean

# Everything a run needs, as root: system packages (apt), the eBPF objects and `dev`.
install:
	./scripts/install.sh

# The eBPF programs, built from source with clang: the in-fabric ECN/trimming queue (tc), the
# fidelity monitor's link-gap histogram (qdisc:qdisc_dequeue tracepoint), and routers' End SIDs
# for kernels without seg6local (tc).
BPF_OBJ := testbed/kernel/bpf/fabric_queue.o testbed/kernel/bpf/link_gap.o \
	testbed/kernel/bpf/usid_end.o
bpf: $(BPF_OBJ)
testbed/kernel/bpf/%.o: testbed/kernel/bpf/%.c
	clang -O2 -g -Wall -Werror -target bpf -I/usr/include/$$(uname -m)-linux-gnu -c $< -o $@

# A venv with the package (editable), its test extras and the C extension: no root, no apt;
# the extension needs gcc, the Python headers and zlib's.
dev: $(VENV)/.dev ext
$(BIN)/python:
	$(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	$(BIN)/python -m pip install -q "setuptools>=61"
$(VENV)/.dev: pyproject.toml setup.py requirements.txt | $(BIN)/python
	$(BIN)/python -m pip install -q --no-build-isolation -e ".[test]"
	touch $@

# The host agents' per-datagram work in C (hostagent/_fastio.c: batched socket IO, the
# transport header), declared in setup.py and built in place for the venv's Python.
EXT_SUFFIX := $(shell $(SYSTEM_PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
EXT := hostagent/_fastio$(EXT_SUFFIX)
ext: $(EXT)
$(EXT): hostagent/_fastio.c hostagent/_crc32.c hostagent/_crc32.h setup.py | $(BIN)/python
	$(BIN)/python setup.py -q build_ext --inplace

# The sans-IO protocol (hostagent/protocol) and its IO driver (hostagent/runtime/driver.py,
# delay_line.py) compiled by mypyc from their own sources: part of `install`, so what `make demo` and `make test`
# run. It is used while it is newer than every source (hostagent/compiled.py); MRC_TESTBED_PURE=1
# runs the sources anyway, `make pure` deletes it. setup.py reads the module list from hostagent/compiled.py, with MRC_TESTBED_PURE=1 so that
# the build being replaced is not loaded meanwhile. The touch dates the build after its sources
# even where mypyc left a generated C file, and so its module, as it was.
PROTOCOL_BUILD := hostagent/protocol/compiled__mypyc$(EXT_SUFFIX)
COMPILED_BUILDS := hostagent/protocol/*$(EXT_SUFFIX) hostagent/runtime/*$(EXT_SUFFIX)
fast: dev $(PROTOCOL_BUILD)
$(PROTOCOL_BUILD): $(wildcard hostagent/protocol/*.py) hostagent/runtime/driver.py \
		hostagent/runtime/delay_line.py \
		hostagent/compiled.py setup.py | $(VENV)/.dev
	MRC_TESTBED_PURE=1 MRC_TESTBED_COMPILE=1 $(BIN)/python setup.py -q build_ext --inplace
	touch $(COMPILED_BUILDS)
pure:
	rm -f $(COMPILED_BUILDS)

demo: install
	$(BIN)/mrc-testbed run

# The quickstart and a fault on one machine and over 2 emulated servers (VXLAN between them).
cluster-demo: install
	$(BIN)/python -m bench.cluster

test: install lint
	$(PYTEST) tests

# The integration tests that depend on the kernel's features, run under a stock Debian kernel
# in QEMU (scripts/stock-kernel/run.sh; VM_KERNEL=backports for 6.12): netem (link latency,
# the delay fault), seg6local End SIDs, a kernel without the ECMP hash seed (6.1). Not part of `test`: QEMU's
# software CPU runs them 2-5x slower (their timing tolerances tripled there), and it would add
# QEMU to every install.
STOCK_KERNEL_TESTS ?= tests/integration/test_delay_line.py tests/integration/test_fabric.py \
	tests/integration/test_faults.py::test_delay_adds_to_the_links_round_trip_and_is_undone
stock-kernel-test: install
	./scripts/install.sh --stock-kernel
	./scripts/stock-kernel/run.sh 'MRC_TESTBED_TIMING_SCALE=3 $(PYTEST) -q -p no:cacheprovider \
		$(STOCK_KERNEL_TESTS)'

# The rules the code follows (pyproject.toml): ruff everywhere, mypy on every package.
lint: dev
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: dev
	$(PYTEST) tests/unit

integration: install
	$(PYTEST) tests/integration

# The JSON Schemas editors read (each shipped scenario and drill names its own on line 1),
# generated from the pydantic models (testbed/scenario/schema.py, drill.py), and the results
# tables' columns (runcontract/tables.py).
schemas: dev
	$(BIN)/mrc-testbed schema > schemas/scenario.schema.json
	$(BIN)/mrc-testbed schema --drill > schemas/drill.schema.json
	$(BIN)/mrc-testbed schema --meta > schemas/meta.schema.json
	$(BIN)/mrc-testbed schema --tables > schemas/tables.json

# Mermaid, which draws the EV state diagram in the browser, served by the site itself so that
# the page renders offline (mkdocs-material fetches it from a CDN unless the page defines it).
# A pinned release from the npm registry, checked against its hash, kept out of git (2.7 MB).
MERMAID_VERSION := 11.12.2
MERMAID_SHA256  := d0830a6c05546e9edb8fe20a8f545f3e0dc7c4c3134d584bad9c13a99d7a71e0
MERMAID_JS      := docs/javascripts/mermaid.min.js
MERMAID_TGZ     := build/mermaid/mermaid-$(MERMAID_VERSION).tgz
$(MERMAID_TGZ):
	mkdir -p $(@D)
	cd $(@D) && npm pack --silent mermaid@$(MERMAID_VERSION) >/dev/null
$(MERMAID_JS): $(MERMAID_TGZ)
	tar -xzf $< -C $(<D) package/dist/mermaid.min.js
	echo "$(MERMAID_SHA256)  $(<D)/package/dist/mermaid.min.js" | sha256sum -c --quiet
	mkdir -p $(@D)
	cp $(<D)/package/dist/mermaid.min.js $@

# The site opens from disk (site/index.html) as well as from a server: mkdocs-material's offline
# plugin links pages as files and inlines the search index, and its search runs its web worker
# in an iframe through this shim (pinned from the npm registry as Mermaid is, kept out of git).
IFRAME_WORKER_VERSION := 1.0.4
IFRAME_WORKER_SHA256  := e8e412dbcfea9b7e31b5ffa288d7b6035915e714c542f4176a0cdbe262fc9609
IFRAME_WORKER_JS      := docs/javascripts/iframe-worker-shim.js
IFRAME_WORKER_TGZ     := build/iframe-worker/iframe-worker-$(IFRAME_WORKER_VERSION).tgz
$(IFRAME_WORKER_TGZ):
	mkdir -p $(@D)
	cd $(@D) && npm pack --silent iframe-worker@$(IFRAME_WORKER_VERSION) >/dev/null
$(IFRAME_WORKER_JS): $(IFRAME_WORKER_TGZ)
	tar -xzf $< -C $(<D) package/shim/index.js
	echo "$(IFRAME_WORKER_SHA256)  $(<D)/package/shim/index.js" | sha256sum -c --quiet
	mkdir -p $(@D)
	cp $(<D)/package/shim/index.js $@

# The documentation site (mkdocs-material, docs/ and mkdocs.yml) into site/, every warning an
# error; docs/gen_pages.py generates the reference pages from the code as it builds.
docs: dev $(VENV)/.docs $(MERMAID_JS) $(IFRAME_WORKER_JS)
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict
$(VENV)/.docs: pyproject.toml $(VENV)/.dev
	$(BIN)/python -m pip install -q --no-build-isolation -e ".[test,docs]"
	touch $@

# The terminal output the docs show (quick start, the first-fault and drill tutorials, README),
# printed again by the commands themselves and written between the pages' transcript markers
# with the commit and date (scripts/transcripts.py); root, like `make demo`, which it runs.
transcripts: install
	$(BIN)/python scripts/transcripts.py

bench: install
	$(BIN)/python -m bench.build

# Leftovers of crashed runs (namespaces, processes), found by the names the testbed recorded.
clean:
	@if [ -x $(BIN)/mrc-testbed ]; then $(BIN)/mrc-testbed clean; fi
	find . -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
	rm -rf .pytest_cache .hypothesis .mypy_cache .ruff_cache

distclean: clean
	rm -rf $(VENV) build site *.egg-info $(BPF_OBJ) $(EXT) $(MERMAID_JS) $(IFRAME_WORKER_JS) \
		$(COMPILED_BUILDS)
