#!/bin/bash
# Usage: scripts/stock-kernel/build.sh [stable|backports]     (default stable)
#
# What scripts/stock-kernel/run.sh boots: a stock Debian kernel, fetched as a package without
# installing it (stable = bookworm's linux-image-amd64, 6.1, the Vagrant VM's; backports =
# bookworm-backports', 6.12, through a private apt list, the host's apt sources untouched),
# unpacked under $STOCK_KERNEL_DIR (default build/stock-kernel/), with an initramfs:
# busybox (static) and the few modules that mount the host's root over virtio-9p under a
# tmpfs overlay. Every other module (sch_netem, veth, ...) is loaded in the VM from the
# unpacked package. kernels/<flavor>.kver names the version run.sh boots for that flavor.
# Needs: apt-get, dpkg-deb, busybox-static, xz/zstd (scripts/install.sh --stock-kernel).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=${STOCK_KERNEL_DIR:-$REPO/build/stock-kernel}
mkdir -p "$HERE"
HERE=$(cd "$HERE" && pwd)
cd "$HERE"
FLAVOR=${1:-stable}

APT=()
if [ "$FLAVOR" = backports ]; then
  mkdir -p apt/lists/partial apt/cache
  echo "deb http://deb.debian.org/debian bookworm-backports main" > apt/sources.list
  APT=(-o "Dir::Etc::sourcelist=$HERE/apt/sources.list" -o Dir::Etc::sourceparts=-
       -o "Dir::State::Lists=$HERE/apt/lists" -o "Dir::Cache=$HERE/apt/cache")
  [ -n "$(ls apt/lists 2>/dev/null | grep -v partial)" ] || apt-get "${APT[@]}" update
elif [ "$FLAVOR" != stable ]; then
  echo "usage: $0 [stable|backports]" >&2; exit 2
fi

# host tools the VM needs but the host lacks, copied into the VM's /usr/local/sbin (tmpfs
# upper) at boot: kmod (modprobe & co.; the host has no kmod) and brctl (Mininet's lxbr)
mkdir -p debs kernels tools
if [ ! -x tools/kmod ] || [ ! -x tools/brctl ]; then
  rm -rf debs/x && (cd debs && apt-get download kmod bridge-utils)
  for d in debs/kmod_*.deb debs/bridge-utils_*.deb; do dpkg-deb -x "$d" debs/x; done
  cp debs/x/bin/kmod debs/x/sbin/brctl tools/
fi

# --- the kernel ---
pkg=$(apt-cache "${APT[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
KVER=${pkg#linux-image-}
K=kernels/$KVER
if [ ! -f "$K/boot/vmlinuz-$KVER" ]; then
  (cd debs && apt-get "${APT[@]}" download "$pkg")
  dpkg-deb -x debs/"$pkg"_*.deb "$K"
fi
MOD=$K/lib/modules/$KVER
if [ ! -f "$MOD/modules.dep" ]; then
  (exec -a depmod tools/kmod -b "$HERE/$K" -F "$K/boot/System.map-$KVER" "$KVER")
fi
echo "$KVER" > "kernels/$FLAVOR.kver"

# --- initramfs tree ---
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T"/{bin,sbin,proc,sys,dev,lower,upper,newroot,ctl,lib/modules}
echo "$HERE" > "$T/here"  # where the unpacked modules and tools are, seen from the VM
echo "$REPO" > "$T/repo"  # where the command runs
cp /bin/busybox "$T/bin/busybox"
for a in sh mount umount mkdir insmod cat echo sleep poweroff switch_root stty ln cp ip hostname; do
  ln -s busybox "$T/bin/$a"
done

# modules for the boot path, in dependency order (modules.dep lists deps after the module,
# deepest last, so insert reversed deps first)
want="virtio_pci 9pnet_virtio 9p overlay"
order=()
add() {  # $1 = relative path in modules.dep
  local m=$1 line deps d
  for d in "${order[@]:-}"; do [ "$d" = "$m" ] && return; done
  line=$(grep "^$m:" "$MOD/modules.dep")
  deps=${line#*:}
  for d in $(echo $deps | tr ' ' '\n' | tac); do add "$d"; done
  order+=("$m")
}
for w in $want; do
  add "$(grep -E "/$w\.ko(\.xz|\.zst)?:" "$MOD/modules.dep" | cut -d: -f1)"
done
: > "$T/lib/modules/load-order"
for m in "${order[@]}"; do
  b=$(basename "$m"); b=${b%.xz}; b=${b%.zst}  # busybox insmod gets plain .ko files
  case "$m" in
    *.xz) xz -dc "$MOD/$m" ;; *.zst) zstd -qdc "$MOD/$m" ;; *) cat "$MOD/$m" ;;
  esac > "$T/lib/modules/$b"
  echo "$b" >> "$T/lib/modules/load-order"
done

cat > "$T/init" <<'EOF'
#!/bin/sh
# PID 1 of the VM: host root (9p, ro) + tmpfs upper = overlay new root; run the command
# from the ctl share in it; write its exit code to the share; power off.
export PATH=/bin:/sbin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
KVER=$(cat /kver)
HERE=$(cat /here)
for m in $(cat /lib/modules/load-order); do insmod /lib/modules/$m || echo "vm-init: insmod $m failed"; done
die() { echo "vm-init: $*"; echo 254 > /ctl/rc; sync; poweroff -f; }
O=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o $O ctl /ctl || die "no ctl share"
mount -t 9p -o $O,cache=loose,ro hostroot /lower || die "no hostroot share"
mount -t tmpfs -o mode=755 tmpfs /upper
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot || die "overlay failed"
R=/newroot
# stock modules + kmod (the host has neither) inside the new root, in the tmpfs upper only
mkdir -p $R/lib/modules/$KVER $R/usr/local/sbin
mount --bind /lower$HERE/kernels/$KVER/lib/modules/$KVER $R/lib/modules/$KVER
cp /lower$HERE/tools/* $R/usr/local/sbin/
for a in modprobe insmod rmmod lsmod modinfo depmod; do ln -sf kmod $R/usr/local/sbin/$a; done
echo /usr/local/sbin/modprobe > /proc/sys/kernel/modprobe  # kernel autoload, after switch_root
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o ptmxmode=0666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
mount -t tmpfs -o mode=755 tmpfs $R/run
mount -t tmpfs -o mode=1777 tmpfs $R/tmp
mount -t bpf bpf $R/sys/fs/bpf
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup
mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
mkdir -p $R/run/vmctl; mount --bind /ctl $R/run/vmctl
cp /repo $R/run/vm-repo
hostname stock-kernel
ip link set lo up
stty -F /dev/ttyS1 raw -echo 2>/dev/null
# stage 2 runs as PID 1 in the new root after switch_root (a real root, not a chroot: setns()
# into a mount namespace, as mnexec -a does, would otherwise land in the initramfs)
mkdir -p $R/usr/local/lib/vm; cp /bin/busybox $R/usr/local/lib/vm/busybox
cat > $R/usr/local/sbin/vm-stage2 <<'EOS'
#!/bin/sh
/usr/local/sbin/modprobe -a $(cat /run/vmctl/preload) || echo "vm-init: preload failed"
{ /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c 'cd "$(cat /run/vm-repo)" && exec /bin/bash /run/vmctl/cmd' </dev/null
  echo $? > /run/vmctl/rc; } 2>&1 | cat > /dev/ttyS1
sync
/usr/local/lib/vm/busybox poweroff -f
EOS
chmod +x $R/usr/local/sbin/vm-stage2
exec switch_root $R /usr/local/sbin/vm-stage2
EOF
chmod +x "$T/init"
echo "$KVER" > "$T/kver"

(cd "$T" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$K/initramfs.cpio.gz"
echo "built $HERE/$K/initramfs.cpio.gz for $KVER with: $(tr '\n' ' ' < "$T/lib/modules/load-order")"
