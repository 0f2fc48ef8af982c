#!/bin/bash
# Usage: scripts/stock-kernel/run.sh 'shell command line'
#
# Runs a command as root under a stock Debian kernel, which has what this project's own
# machines lack (sch_netem, seg6local) and lacks what they have (e.g. the ECMP hash seed,
# Linux 6.11+): tests that skip here for a missing feature run there. QEMU boots the kernel
# (scripts/stock-kernel/build.sh makes it on first use) with this machine's root as a
# read-only 9p lower layer under a tmpfs overlay, so nothing the VM writes reaches the host,
# runs the command in the checkout, prints its stdout and stderr (merged, through a second
# serial port), exits with its exit code and powers the VM off. Boot to command: 7-9 s.
#
# The CPU is QEMU's software emulation (TCG: a hypervisor's /dev/kvm that cannot run a stock
# kernel is common on cloud VMs), 2-5x slower than the host: timing-tight tests may miss.
#
# Env: VM_KERNEL=stable (bookworm 6.1, default) | backports (bookworm-backports 6.12)
#      VM_ACCEL=tcg (default) | kvm (where /dev/kvm runs stock kernels)
#      VM_MEM=8G VM_SMP=2 VM_TIMEOUT=3600 (seconds, whole VM) VM_KEEP=1 (keep the run folder)
#      VM_PRELOAD="modules to load before the command"
#      STOCK_KERNEL_DIR (default build/stock-kernel/ of the checkout)
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=${STOCK_KERNEL_DIR:-$REPO/build/stock-kernel}
[ $# -ge 1 ] || { echo "usage: $0 'command line'" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || {
  echo "error: qemu-system-x86_64 is not installed" >&2
  echo "  fix: sudo scripts/install.sh --stock-kernel (or apt-get install qemu-system-x86 busybox-static)" >&2
  exit 2; }
FLAVOR=${VM_KERNEL:-stable}
[ -f "$HERE/kernels/$FLAVOR.kver" ] || "$REPO/scripts/stock-kernel/build.sh" "$FLAVOR" >&2 || exit 2
HERE=$(cd "$HERE" && pwd)
KVER=$(cat "$HERE/kernels/$FLAVOR.kver")
K=$HERE/kernels/$KVER

mkdir -p "$HERE/share"
RUN=$(mktemp -d "$HERE/share/run.XXXXXX")
printf '%s\n' "$*" > "$RUN/cmd"
echo "${VM_PRELOAD:-sch_netem sch_htb sch_ingress veth ifb bridge cls_bpf act_bpf act_mirred sch_tbf}" > "$RUN/preload"

case "${VM_ACCEL:-tcg}" in
  kvm) ACCEL=(-accel kvm -cpu host) ;;
  *)   ACCEL=(-accel tcg,thread=multi -cpu max) ;;
esac

timeout --foreground "${VM_TIMEOUT:-3600}" qemu-system-x86_64 "${ACCEL[@]}" \
  -m "${VM_MEM:-8G}" -smp "${VM_SMP:-2}" -display none -monitor none -no-reboot -nic none \
  -kernel "$K/boot/vmlinuz-$KVER" -initrd "$K/initramfs.cpio.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
  -virtfs "local,path=$RUN,mount_tag=ctl,security_model=passthrough" \
  -serial "file:$RUN/console.log" \
  -chardev stdio,id=out,signal=off -serial chardev:out \
  </dev/null 2>"$RUN/qemu.err"
qrc=$?

if [ -s "$RUN/rc" ]; then
  rc=$(cat "$RUN/rc")
else
  rc=255
  echo "stock-kernel: no exit code from the VM (qemu rc $qrc); console and qemu stderr follow" >&2
  tail -n 40 "$RUN/console.log" "$RUN/qemu.err" >&2
fi
[ -n "${VM_KEEP:-}" ] && echo "stock-kernel: kept $RUN" >&2 || rm -rf "$RUN"
exit "$rc"
