#!/usr/bin/env bash
# Boot Debian's kernels in qemu and run umtrace inside them: the guest test
# suite (tests/vmtest/suite.sh) or a command of yours.
#
# usage: scripts/vmtest.sh [--arch x86_64|arm64] [--kernel IMAGE] [--add DIR]
#                          [--timeout SECS] [-- COMMAND...]
#
# Each guest gets an initramfs with busybox, the static umtrace of its arch
# as `umtrace`, the dynamic loader and libc (so shared libraries and
# dynamically linked programs run), the fake libcuda and the workloads in
# /t (on PATH), NVIDIA's real libcuda.so.1 from Debian's libcuda1 in
# /nvidia, and DIR's files in /add. Without --kernel, every kernel of the
# matrix for the arch(es) is booted: 6.1 and 6.12 on both, 6.12 with 16 KiB
# pages on arm64, and 5.10 on x86_64, which umtrace must refuse (no task
# storage). The fake NVIDIA kernel module (tests/fakedriver) is built
# against each supported kernel's headers, fetched and cached as the
# kernels are (amd64 kbuild tools, cross-compiled for arm64), and put in
# /fakedriver/RELEASE/nvidia.ko (named as the real driver is); each guest has a second NUMA node of
# memory and no CPU, as GH200's HBM. Without COMMAND each
# guest runs the suite and one line per guest ends the output:
#   vmtest: ARCH RELEASE: PASS (N checks) | FAIL (what) | REFUSED (why)
# and the exit status is 1 if any guest failed. With COMMAND, its output is
# printed and the status is its exit status (the first non-zero one).
#
# VMTEST_APPEND adds to the guests' kernel command line (e.g.
# softlockup_panic=1 to end a locked-up guest at once); VMTEST_TCG=multi
# gives each vCPU its own host thread; VMTEST_ACCEL=kvm runs guests of the
# host's arch under KVM where /dev/kvm is there (see boot()).
#
# Needs `make vmtest` built (static umtrace and test programs of each arch)
# and scripts/install-deps.sh --cross (qemu, busybox, the arm64 libc).
# Kernels and packages are fetched with apt into
# ${XDG_CACHE_HOME:-~/.cache}/umtrace/vmtest and kept there; console logs
# go to build/vmtest/.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/umtrace/vmtest
LOGDIR=$ROOT/build/vmtest
USAGE="usage: scripts/vmtest.sh [--arch x86_64|arm64] [--kernel IMAGE] [--add DIR] [--timeout SECS] [-- COMMAND...]"

usage() { echo "$USAGE" >&2; exit 2; }
bad() { echo "vmtest: $*; see --help" >&2; exit 2; }
die() { echo "vmtest: $*" >&2; exit 1; }
note() { echo "vmtest: $*" >&2; }

ARCHES=()
KERNEL=
ADD=
TIMEOUT=
CMD=()
while [ $# -gt 0 ]; do
	case $1 in
	--arch)
		[ $# -ge 2 ] || bad "--arch needs x86_64 or arm64"
		case $2 in x86_64|arm64) ARCHES=("$2") ;; *) bad "unknown arch '$2'" ;; esac
		shift 2 ;;
	--kernel)
		[ $# -ge 2 ] && [ -f "$2" ] || bad "--kernel needs an image file"
		KERNEL=$(realpath "$2"); shift 2 ;;
	--add)
		[ $# -ge 2 ] && [ -d "$2" ] || bad "--add needs a directory"
		ADD=$(realpath "$2"); shift 2 ;;
	--timeout)
		[[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || bad "--timeout needs seconds"
		TIMEOUT=$2; shift 2 ;;
	--) shift; CMD=("$@"); [ ${#CMD[@]} -gt 0 ] || bad "no COMMAND after --"; break ;;
	-h|--help) usage ;;
	*) bad "unknown argument '$1'" ;;
	esac
done

# --kernel alone: the image says which arch it is for (Ubuntu's and older
# Debian arm64 images are gzip-compressed Image files).
if [ -n "$KERNEL" ] && [ ${#ARCHES[@]} = 0 ]; then
	case $(file -b "$KERNEL") in
	*x86\ boot*) ARCHES=(x86_64) ;;
	*ARM64*|gzip*) ARCHES=(arm64) ;;
	*) bad "cannot tell the arch of $KERNEL: give --arch" ;;
	esac
fi
[ ${#ARCHES[@]} -gt 0 ] || ARCHES=(x86_64 arm64)
# A guest boots and runs the suite in 40 to 60 s under TCG on 2 idle
# cores; this leaves room for a busy host. A command gets the same.
: "${TIMEOUT:=360}"

# ---- per-arch facts ----

debarch() { case $1 in x86_64) echo amd64 ;; arm64) echo arm64 ;; esac; }
builddir() { case $1 in x86_64) echo "$ROOT/build/x86" ;; arm64) echo "$ROOT/build/arm64" ;; esac; }
triplet() { case $1 in x86_64) echo x86_64-linux-gnu ;; arm64) echo aarch64-linux-gnu ;; esac; }
# The kernel series of the matrix (README: umtrace needs 5.15 or later).
# 6.12-16k: Debian's arm64-16k flavour (16 KiB pages), from the same
# 6.12 backport as the cloud kernels, so that bookworm's amd64 kbuild
# tools build its modules (trixie's are linked against a newer glibc).
matrix() { case $1 in x86_64) echo "6.1 6.12 5.10" ;; arm64) echo "6.1 6.12 6.12-16k" ;; esac; }

# ---- fetching, with apt, into the cache ----

# 5.10 (bullseye) and libcuda1 (non-free) are not in this machine's
# sources: the private apt configuration of scripts/debfetch.sh reads them.
# Only bullseye's main suite: bullseye-security lists newer 5.10 kernels
# that the archive here answers 404 for.
PAPT_DIR=$CACHE/apt
papt_sources() {
	local keys=/usr/share/keyrings/debian-archive-keyring.gpg
	local mirror=http://deb.debian.org
	cat <<-EOF
	deb [arch=amd64,arm64 signed-by=$keys] $mirror/debian bookworm non-free
	deb [arch=amd64,arm64 signed-by=$keys] $mirror/debian-security bookworm-security non-free
	deb [arch=amd64 signed-by=$keys] $mirror/debian bullseye main
	EOF
}
# shellcheck source=scripts/debfetch.sh
. "$ROOT/scripts/debfetch.sh"
papt_init

# kernel_image ARCH SERIES: the cached vmlinuz of the newest kernel of the
# series that apt sees (fetched if new); the newest cached one if apt
# cannot be asked.
kernel_image() {
	local arch=$1 series=$2 da src re pkg dir img glob
	da=$(debarch "$arch")
	case $series in
	6.1) src=s re="^linux-image-6\\.1\\.0-[0-9]+-cloud-$da-unsigned\$" ;;
	6.12) src=s re="^linux-image-6\\.12\\.[0-9]+\\+deb12-cloud-$da-unsigned\$" ;;
	6.12-16k) src=s re="^linux-image-6\\.12\\.[0-9]+\\+deb12-$da-16k-unsigned\$" ;;
	5.10) src=p re="^linux-image-5\\.10\\.0-[0-9]+-cloud-$da-unsigned\$" ;;
	esac
	if [ "$src" = p ] && ! ls "$PAPT_DIR"/lists/*bullseye*Packages* >/dev/null 2>&1; then
		papt_update || true
	fi
	pkg=$(newest_pkg "$src" "$re")
	if [ -n "$pkg" ]; then
		dir=$CACHE/kernels/$pkg
		if ! ls "$dir"/boot/vmlinuz-* "$dir"/boot/config-* >/dev/null 2>&1; then
			note "fetching $pkg"
			fetch_deb "$src" "$pkg:$da" "$dir" './boot/vmlinuz-*' './boot/config-*' ||
				dir=
		fi
	fi
	img=$(ls -d "${dir:-/nonexistent}"/boot/vmlinuz-* 2>/dev/null | head -n1)
	if [ -z "$img" ]; then
		case $series in
		*-16k) glob="${series%-16k}[.-]*-$da-16k" ;;
		*) glob="${series}[.-]*-cloud-$da" ;;
		esac
		# shellcheck disable=SC2086 # $glob is a pattern
		img=$(ls -d "$CACHE"/kernels/*/boot/vmlinuz-$glob 2>/dev/null | sort -V | tail -n1)
		[ -n "$img" ] || return 1
		note "apt has no $series kernel for $da: using the cached $(basename "$img")"
	fi
	echo "$img"
}

# busybox_for ARCH: a static busybox. The machine's own for its arch
# (busybox-static), Debian's arm64 one fetched into the cache.
busybox_for() {
	local da dir
	if [ "$1" = "$(uname -m)" ]; then
		[ -x /bin/busybox ] || return 1
		readelf -l /bin/busybox | grep -q INTERP && return 1
		echo /bin/busybox
		return
	fi
	da=$(debarch "$1")
	dir=$CACHE/busybox-$da
	if [ ! -x "$dir/bin/busybox" ]; then
		note "fetching busybox-static:$da"
		fetch_deb s "busybox-static:$da" "$dir" ./bin/busybox || return 1
	fi
	echo "$dir/bin/busybox"
}

# libcuda_for ARCH: NVIDIA's libcuda.so.<version> from Debian's libcuda1.
libcuda_for() {
	local da dir="" ver
	da=$(debarch "$1")
	ls "$PAPT_DIR"/lists/*non-free*Packages* >/dev/null 2>&1 || papt_update || true
	ver=$(pkg_version p "libcuda1:$da")
	if [ -n "$ver" ]; then
		dir=$CACHE/libcuda1-$da/$ver
		if ! ls "$dir"/usr/lib/*/nvidia/current/libcuda.so.*.* >/dev/null 2>&1; then
			note "fetching libcuda1:$da $ver"
			fetch_deb p "libcuda1:$da" "$dir" './usr/lib/*/nvidia/current/libcuda.so.*' ||
				dir=
		fi
	fi
	# apt could not be asked: the newest one cached
	[ -n "$dir" ] || dir="$CACHE/libcuda1-$da/*"
	# shellcheck disable=SC2086 # $dir may be a pattern
	ls -d $dir/usr/lib/*/nvidia/current/libcuda.so.*.* 2>/dev/null | sort -V | tail -n1
}

# ---- the fake NVIDIA kernel module ----

FAKEDRV_SRCS=(Kbuild fakenv.c fakenv_uapi.h)

# kbuild_tree RELEASE DEBARCH: the headers to build modules against for
# kernel RELEASE: its linux-headers package, the common headers its
# Makefile includes and the linux-kbuild tools of this machine's arch,
# extracted into one tree in the cache (their symlinks are relative to
# /usr), the Makefile's absolute include pointed into it.
kbuild_tree() {
	local rel=$1 da=$2 root=$CACHE/kbuild/$1 hdr tmp common kb d
	hdr=$root/usr/src/linux-headers-$rel
	if [ ! -e "$root/complete" ]; then
		rm -rf "$root"
		mkdir -p "$root"
		tmp=$(mktemp -d "$CACHE/dl.XXXXXX")
		note "fetching the headers of $rel"
		download s "linux-headers-$rel:$da" "$tmp" &&
			dpkg-deb -x "$tmp"/*.deb "$root" || { rm -rf "$tmp"; return 1; }
		common=$(sed -n 's|^include /usr/src/\([^/]*\)/Makefile$|\1|p' "$hdr/Makefile")
		kb=$(readlink "$hdr/scripts" | sed -n 's|^\.\./\.\./lib/\([^/]*\)/scripts$|\1|p')
		rm -f "$tmp"/*.deb
		[ -n "$common" ] && [ -n "$kb" ] &&
			download s "$common" "$tmp" &&
			download s "$kb:$(dpkg --print-architecture)" "$tmp" || { rm -rf "$tmp"; return 1; }
		for d in "$tmp"/*.deb; do
			dpkg-deb -x "$d" "$root"
		done
		rm -rf "$tmp"
		sed -i "s|^include /usr/src/|include $root/usr/src/|" "$hdr/Makefile"
		touch "$root/complete"
	fi
	echo "$hdr"
}

# fakedriver_for ARCH IMAGE: tests/fakedriver's module built for IMAGE's
# kernel, kept in the cache by its sources' hash; nothing (and a note)
# where it cannot be built, and the suite skips its checks saying why.
fakedriver_for() {
	local arch=$1 img=$2 rel sum out hdr src
	local -a cross=()
	rel=$(basename "$img")
	rel=${rel#vmlinuz-}
	! refusable "$rel" || return 0
	sum=$(cd "$ROOT/tests/fakedriver" && cat "${FAKEDRV_SRCS[@]}" | sha256sum | cut -c 1-16)
	out=$CACHE/fakedriver/$rel-$sum
	if [ ! -e "$out/nvidia.ko" ]; then
		hdr=$(kbuild_tree "$rel" "$(debarch "$arch")") ||
			{ note "no headers for $rel: the fake driver's checks will skip"; return 0; }
		src=$(mktemp -d "$WORK/fakedriver.XXXXXX")
		(cd "$ROOT/tests/fakedriver" && cp "${FAKEDRV_SRCS[@]}" "$src/")
		[ "$(triplet "$arch")" = "$(gcc -dumpmachine)" ] ||
			cross=(ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-)
		# No BTF for the module: it would need pahole, and nothing reads it.
		if ! make -s -C "$hdr" M="$src" "${cross[@]}" CONFIG_DEBUG_INFO_BTF_MODULES= \
			modules >"$src/build.log" 2>&1; then
			note "the fake driver does not build for $rel: $(tail -n 3 "$src/build.log" | tr '\n' ' ')"
			return 0
		fi
		mkdir -p "$out"
		cp "$src/nvidia.ko" "$out/"
	fi
	echo "$out/nvidia.ko"
}

# ---- the initramfs ----

# torch_libs ARCH STAGE: Debian's real libc10 files of ARCH that
# scripts/fetch-torch.sh cached, in /torch, and the form of PyTorch's hook
# each defines as binutils reads it (/torch/forms): the suite checks that
# umtrace's own ELF reader names the same.
torch_libs() {
	local da f name
	da=$(debarch "$1")
	mkdir -p "$2/torch"
	: >"$2/torch/forms"
	for f in "${XDG_CACHE_HOME:-$HOME/.cache}"/umtrace/torch/libs/*-"$da"/*/usr/lib/*/libc10.so.*.*.*; do
		[ -f "$f" ] || continue
		name=${f#*/torch/libs/}
		name=${name%%/*}-$(basename "$f")	# PKG-ARCH-libc10.so.X.Y.Z
		cp "$f" "$2/torch/$name"
		readelf -W --dyn-syms "$f" | awk -v f="$name" '{ sub(/@.*/, "", $8) }
			$8 ~ /^_ZN3c1027reportMemoryUsageToProfilerEPvl/ && $7 != "UND" { print f, $8 }' |
			sort -u >>"$2/torch/forms"
	done
}

# needed FILE: the sonames FILE links against.
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# copy_libs ARCH STAGE FILE...: the libraries FILEs need, and theirs, from
# the machine's multiarch directory of ARCH (libc6, libc6:arm64).
copy_libs() {
	local arch=$1 stage=$2 trip f so src
	local -a names todo=() seen=()
	shift 2
	trip=$(triplet "$arch")
	for f in "$@"; do
		read -r -a names <<<"$(needed "$f" | tr '\n' ' ')"
		todo+=("${names[@]}")
	done
	mkdir -p "$stage/lib/$trip"
	while [ ${#todo[@]} -gt 0 ]; do
		so=${todo[0]}
		todo=("${todo[@]:1}")
		[[ " ${seen[*]} " == *" $so "* ]] && continue
		seen+=("$so")
		[ "$so" != libcuda.so.1 ] || continue	# the fake, in /t
		src=/usr/lib/$trip/$so
		[ -e "$src" ] || die "$so ($arch) is not in /usr/lib/$trip: run scripts/install-deps.sh --cross"
		cp -L "$src" "$stage/lib/$trip/$so"
		read -r -a names <<<"$(needed "$src" | tr '\n' ' ')"
		todo+=("${names[@]}")
	done
}

# The guest's /init: mounts, then /vmtest/run.sh; its exit status goes out
# on the console as a marker line, and the guest powers off.
write_init() {
	cat >"$1" <<-'EOF'
	#!/bin/sh
	/bin/busybox --install -s /bin
	export PATH=/bin:/t HOME=/root LD_LIBRARY_PATH=/t
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev
	mount -t bpf bpf /sys/fs/bpf
	mount -t cgroup2 cgroup2 /sys/fs/cgroup
	mount -t tmpfs tmpfs /tmp
	echo "vmtest-kernel: $(uname -r)"
	cd /tmp
	sh /vmtest/run.sh
	echo "vmtest-exit: $?"
	poweroff -f
	EOF
	chmod 755 "$1"
}

# shquote WORD: WORD quoted for sh.
shquote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# make_initrd ARCH OUT IMAGE...: the initramfs of ARCH as an uncompressed
# cpio (the kernel copies it faster than it would decompress it under TCG).
# The IMAGEs' configs go to /boot, where umtrace reads the page flags'
# layout (--device-nodes).
make_initrd() {
	local arch=$1 out=$2 bld stage bb lib f interp ko
	shift 2
	bld=$(builddir "$arch")
	stage=$(mktemp -d "$WORK/stage.XXXXXX")
	bb=$(busybox_for "$arch") || die "no static busybox for $arch: run scripts/install-deps.sh --cross"
	mkdir -p "$stage"/{bin,t,nvidia,vmtest,add,proc,sys,dev,tmp,root,run}
	cp "$bb" "$stage/bin/busybox"
	ln -s busybox "$stage/bin/sh"
	cp "$bld/umtrace-static" "$stage/bin/umtrace"
	for f in "${PROGS[@]}"; do
		cp "$bld/tests/$f" "$stage/t/$f"
	done
	lib=$(libcuda_for "$arch")
	if [ -n "$lib" ]; then
		cp "$lib" "$stage/nvidia/libcuda.so.1"
		# Where the entry points are in NVIDIA's file: the suite checks
		# the probes fired there.
		readelf -W --dyn-syms "$lib" | awk '{ sub(/@.*/, "", $8) } $8 ~ /^cu(Init|MemAlloc_v2|MemHostAlloc|MemFree_v2)$/ && $7 != "UND" {
			print $8, "0x" $2 }' | sort -u >"$stage/nvidia/offsets"
	else
		note "no libcuda1 for $arch: the real-driver checks will fail"
	fi
	copy_libs "$arch" "$stage" "${PROGS[@]/#/$bld/tests/}" ${lib:+"$lib"}
	interp=$(readelf -l "$bld/tests/alloc_mix" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
	mkdir -p "$stage$(dirname "$interp")"
	[ -e "$stage$interp" ] || cp -L "$interp" "$stage$interp"
	torch_libs "$arch" "$stage"
	cp "$ROOT/tests/vmtest/suite.sh" "$stage/vmtest/suite.sh"
	if [ ${#CMD[@]} -gt 0 ]; then
		for f in "${CMD[@]}"; do printf '%s ' "$(shquote "$f")"; done >"$stage/vmtest/run.sh"
		echo >>"$stage/vmtest/run.sh"
	else
		echo 'exec sh /vmtest/suite.sh' >"$stage/vmtest/run.sh"
	fi
	[ -z "$ADD" ] || cp -a "$ADD/." "$stage/add/"
	mkdir -p "$stage/boot"
	for f in "$@"; do
		cp "$(dirname "$f")"/config-* "$stage/boot/" 2>/dev/null || true
		ko=$(fakedriver_for "$arch" "$f")
		[ -z "$ko" ] || install -D -m 644 "$ko" "$stage/fakedriver/${f##*/vmlinuz-}/nvidia.ko"
	done
	write_init "$stage/init"
	(cd "$stage" && find . | cpio -o -H newc -R 0:0 --quiet) >"$out"
	rm -rf "$stage"
}

# ---- running a guest ----

# boot ARCH IMAGE INITRD LOG: qemu, killed after TIMEOUT seconds; the
# console goes to LOG and, through show(), to stdout. Returns qemu's status
# (124 on the timeout).
# shellcheck disable=SC2054 # the commas are inside qemu's option values
boot() {
	local arch=$1 img=$2 initrd=$3 log=$4
	local -a qemu
	# loglevel=5: the kernel's warnings (a WARN, a soft lockup and their
	# stacks) reach the console log, not the boot's chatter.
	local append="panic=-1 loglevel=5 mitigations=off random.trust_cpu=on ${VMTEST_APPEND:-}"
	# -cpu max,pauth-impdef=on: pointer authentication with QEMU's own
	# cheap algorithm; plain max emulates the architected one, 3x slower.
	case $arch in
	x86_64) qemu=(qemu-system-x86_64 -cpu max); append="console=ttyS0 $append" ;;
	arm64) qemu=(qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on)
		append="console=ttyAMA0 $append" ;;
	esac
	# TCG runs both vCPUs in one host thread: with a thread each (MTTCG)
	# 2 of 20 x86 6.1 guests here locked up, a CPU stuck for minutes at
	# a never-patched NOP in __alloc_pages with the other CPU idle, which
	# points at qemu 7.2, not at the guest; one thread was no slower on 2
	# cores and never locked up (16 guests). VMTEST_TCG=multi for MTTCG.
	# KVM only when asked: nested in this project's VMs, it stopped a 6.1
	# guest at boot with an internal error (an emulation failure on a
	# locked cmpxchg16b in the slab allocator), and qemu then waits for a
	# monitor command until the timeout. TCG is slower and always the same.
	if [ "${VMTEST_ACCEL:-tcg}" = kvm ] && [ "$arch" = "$(uname -m)" ] &&
		[ -w /dev/kvm ]; then
		qemu+=(-accel kvm -cpu host)
	else
		qemu+=(-accel "tcg,thread=${VMTEST_TCG:-single}")
	fi
	# Node 1: memory and no CPU, as the HBM that GH200's driver onlines.
	qemu+=(-smp 2 -m 2304M -object memory-backend-ram,id=ram0,size=2G
		-object memory-backend-ram,id=ram1,size=256M
		-numa node,nodeid=0,cpus=0-1,memdev=ram0 -numa node,nodeid=1,memdev=ram1
		-nodefaults -no-reboot -display none -serial stdio
		-kernel "$img" -initrd "$initrd" -append "$append")
	local rc
	set +e
	timeout -k 10 "$TIMEOUT" "${qemu[@]}" </dev/null 2>&1 | sed -u 's/\r$//' | tee "$log" | show
	rc=${PIPESTATUS[0]}
	set -e
	return "$rc"
}

# What of the console the user sees: a command's own output; the suite's
# lines, indented. Not the markers, nor the kernel's lines before init ran
# (the boot) and its last word.
show() {
	local boot='1,/^vmtest-kernel: /{/^\[ *[0-9.]*\] /d}'
	local off='/^\[ *[0-9.]*\] reboot: Power down$/d'
	if [ ${#CMD[@]} -gt 0 ]; then
		sed -u -e "$boot" -e "$off" -e '/^vmtest-\(kernel\|exit\): /d'
	else
		sed -u -e "$boot" -e "$off" -e 's/^/    /'
	fi
}

# The guest's kernel release as it said it, or the image's name.
release_of() {
	local r
	r=$(sed -n 's/^vmtest-kernel: //p' "$1" | tail -n1)
	echo "${r:-$(basename "$2")}"
}

# refusable RELEASE: older than the 5.15 that README requires, so umtrace
# may refuse it.
refusable() {
	local maj min
	IFS=. read -r maj min _ <<<"$1"
	[ "${maj:-0}" -lt 5 ] || { [ "$maj" = 5 ] && [ "${min:-0}" -lt 15 ]; }
}

# verdict ARCH IMAGE LOG QEMU_STATUS: the guest's one line; returns 1 on FAIL.
verdict() {
	local arch=$1 img=$2 log=$3 qrc=$4 rel res exitc
	rel=$(release_of "$log" "$img")
	exitc=$(sed -n 's/^vmtest-exit: \([0-9]*\)$/\1/p' "$log" | tail -n1)
	res=$(sed -n 's/^vmtest-suite: //p' "$log" | tail -n1)
	# the kernel's first word of distress, if it said one
	oops=$(grep -m1 -o -E '(BUG|Kernel panic|Oops|WARNING):.*' "$log" | cut -c 1-120 || true)
	if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
		res="FAIL (timeout after ${TIMEOUT}s${oops:+; $oops})"
	elif [ -z "$exitc" ]; then
		res="FAIL (no exit status: the guest died${oops:+: $oops}; see $log)"
	elif [ ${#CMD[@]} -gt 0 ]; then
		res="exit $exitc"
	else
		case $res in
		PASS\ *) res="PASS (${res#PASS } checks)" ;;
		FAIL\ *) res="FAIL (${res#FAIL })" ;;
		REFUSED\ *)
			if refusable "$rel"; then
				res="REFUSED (${res#REFUSED })"
			else
				res="FAIL (refused a supported kernel: ${res#REFUSED })"
			fi ;;
		*) res="FAIL (the suite ended without a result, status $exitc; see $log)" ;;
		esac
	fi
	RESULTS+=("vmtest: $arch $rel: $res")
	case $res in
	FAIL*) return 1 ;;
	exit\ 0) return 0 ;;
	exit\ *) [ "$STATUS" != 0 ] || STATUS=$exitc; return 0 ;;
	esac
}

# ---- main ----

for tool in cpio readelf dpkg-deb apt-get timeout; do
	command -v "$tool" >/dev/null || die "$tool is missing: run scripts/install-deps.sh"
done
PROGS=(libcuda.so.1 alloc_mix demo pagehog lifecycle dlcycle nofp_chain realcuda_calls)
for arch in "${ARCHES[@]}"; do
	case $arch in
	x86_64) command -v qemu-system-x86_64 >/dev/null ||
		die "qemu-system-x86_64 is missing: run scripts/install-deps.sh" ;;
	arm64) command -v qemu-system-aarch64 >/dev/null ||
		die "qemu-system-aarch64 is missing: run scripts/install-deps.sh" ;;
	esac
	bld=$(builddir "$arch")
	for f in umtrace-static "${PROGS[@]/#/tests/}"; do
		[ -e "$bld/$f" ] || die "$bld/$f is missing: run make vmtest (or make ARCH=${bld##*/} static, and its test programs)"
	done
done

mkdir -p "$CACHE" "$LOGDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vmtest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

RESULTS=()
STATUS=0
FAILED=0
for arch in "${ARCHES[@]}"; do
	images=()
	if [ -n "$KERNEL" ]; then
		images=("$KERNEL")
	else
		for series in $(matrix "$arch"); do
			img=$(kernel_image "$arch" "$series") ||
				die "no $series kernel for $arch: apt cannot fetch one and none is cached"
			images+=("$img")
		done
	fi
	initrd=$WORK/initrd-$arch.cpio
	make_initrd "$arch" "$initrd" "${images[@]}"
	for img in "${images[@]}"; do
		log=$LOGDIR/$arch-$(basename "$img").log
		[ ${#CMD[@]} -gt 0 ] || note "booting $arch $(basename "$img") (log: ${log#"$ROOT"/})"
		qrc=0
		boot "$arch" "$img" "$initrd" "$log" || qrc=$?
		verdict "$arch" "$img" "$log" "$qrc" || FAILED=1
	done
done

if [ ${#CMD[@]} -gt 0 ]; then
	# A command's status is the result; only a guest that gave none says so.
	for r in "${RESULTS[@]}"; do
		case $r in *": FAIL ("*) echo "$r" >&2 ;; esac
	done
	[ "$FAILED" = 0 ] || exit 1
	exit "$STATUS"
fi
printf '%s\n' "${RESULTS[@]}"
exit "$FAILED"
