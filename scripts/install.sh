#!/usr/bin/env bash
# One idempotent installer for everything the testbed needs: used by `make`, by CI and by Vagrant.
# A second run only checks: dpkg for the system packages, make for the rest.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

APT_PACKAGES=(mininet iperf3 iproute2 clang llvm libbpf-dev libbpf1 tcpdump iputils-ping
              python3-venv python3-pip nftables make ethtool
              openssh-server openssh-client  # the cluster mode: servers reached over ssh
              gcc python3-dev zlib1g-dev  # the agents' C extension (hostagent/_fastio.c)
              ruby)  # ruby: only to check the Vagrantfile in the tests

# --stock-kernel: also what `make stock-kernel-test` needs (scripts/stock-kernel/): QEMU, a
# static busybox for its initramfs, the decompressors of Debian's kernel modules
if [ "${1:-}" = "--stock-kernel" ]; then
    APT_PACKAGES+=(qemu-system-x86 busybox-static xz-utils zstd)
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install: needs root to install system packages; run it with sudo" >&2
    exit 1
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install: apt packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-install-recommends: Mininet recommends Open vSwitch, which the testbed does not use
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The eBPF programs (ECN/trimming queue, link-gap monitor) and `make dev`: the venv on the
# system Python (so Mininet's module is visible) with the package, its test extras and the
# agents' C extension (make skips what is up to date).
make -s bpf dev
# The protocol compiled by mypyc (make fast): 20-30% less agent CPU per packet. Without it the
# agents run the protocol's sources (hostagent/compiled.py), so a failed build is said, not fatal.
if ! make -s fast >.venv/protocol-build.log 2>&1; then
    echo "install: the protocol's mypyc build failed (.venv/protocol-build.log); the agents" \
         "run its sources, with more CPU per packet: \`make fast\` retries" >&2
fi
.venv/bin/python -c "import mininet.net, pyroute2, pydantic" \
    || { echo "install: the venv cannot import mininet/pyroute2/pydantic" >&2; exit 1; }
