# Two commands do everything on a fresh machine: `sudo make demo` and `sudo make test`.
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST := $(BIN)/python -m pytest

.PHONY: install bpf ext demo cluster-demo test lint unit integration bench clean distclean

install:
	./scripts/install.sh

# The eBPF programs, built from source with clang: the in-fabric ECN/trimming queue (tc) and
# the fidelity monitor's link-gap histogram (qdisc:qdisc_dequeue tracepoint).
BPF_OBJ := testbed/kernel/bpf/fabric_queue.o testbed/kernel/bpf/link_gap.o
bpf: $(BPF_OBJ)
testbed/kernel/bpf/%.o: testbed/kernel/bpf/%.c
	clang -O2 -g -Wall -Werror -target bpf -I/usr/include/$$(uname -m)-linux-gnu -c $< -o $@

# The host agents' per-datagram work in C (hostagent/_fastio.c: batched socket IO, the transport
# header), built for the system Python the venv runs on; needs gcc, python3-dev and zlib1g-dev.
SYSTEM_PYTHON := /usr/bin/python3
EXT := hostagent/_fastio$(shell $(SYSTEM_PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
ext: $(EXT)
$(EXT): hostagent/_fastio.c
	gcc -O2 -g -Wall -Werror -shared -fPIC \
	    -I$$($(SYSTEM_PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['include'])") \
	    $< -o $@ -lz

demo: install
	$(BIN)/mrc-testbed run

# The quickstart and a fault on one machine and over 2 emulated servers (VXLAN between them).
cluster-demo: install
	$(BIN)/python bench/cluster.py

test: install lint
	$(PYTEST) tests

# The rules the code follows (pyproject.toml): ruff everywhere, mypy strict on the pure packages.
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: install
	$(PYTEST) tests/unit

integration: install
	$(PYTEST) tests/integration

bench: install
	$(BIN)/python bench/build.py

# Leftovers of crashed runs (namespaces, processes), found by the names the testbed recorded.
clean:
	@if [ -x $(BIN)/mrc-testbed ]; then $(BIN)/mrc-testbed clean; fi
	find . -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
	rm -rf .pytest_cache .hypothesis .mypy_cache .ruff_cache

distclean: clean
	rm -rf $(VENV) *.egg-info $(BPF_OBJ) $(EXT)
