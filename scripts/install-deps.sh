#!/usr/bin/env bash
# Install umtrace's build/test dependencies on Debian bookworm (run as root).
# Usage: scripts/install-deps.sh [--cross] [--bench]
#   --cross  also install what a static arm64 cross-build needs.
#   --bench  also install the tools `make bench` compares umtrace with.
# Safe to rerun: apt-get skips what is installed, the arch is added once.
set -euo pipefail

CROSS=0
BENCH=0
for arg in "$@"; do
	case $arg in
	--cross) CROSS=1 ;;
	--bench) BENCH=1 ;;
	*) echo "usage: $0 [--cross] [--bench]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "install-deps: must run as root" >&2; exit 1; }

# No prompts and no recommends: this runs unattended (CI, fresh VMs), where
# something else (unattended-upgrades) may briefly hold the dpkg lock.
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -qq -o DPkg::Lock::Timeout=300)
APT_INSTALL=("${APT[@]}" install -y --no-install-recommends)

# qemu-system-*, busybox-static and cpio: the kernel matrix, `make vmtest`.
# openssh-server: the real sshd the guard must never stop, run by
# tests/integration/test_guard_identity.py on a loopback port of its own
# (Debian's policy-rc.d, where present, keeps the package from starting it).
# debhelper to python3-yaml: `make deb`, lintian, the man pages, the bash
# completion and the Kubernetes manifest's tests (tests/integration/
# test_install.py, test_man.py, test_completion.py, test_deploy.py).
NATIVE=(make gcc g++ clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
	libzstd-dev libdw-dev liblzma-dev libbz2-dev pkg-config python3 procps
	file util-linux libinih-dev prometheus
	chromium libxml2-utils protobuf-compiler python3-jsonschema fonts-dejavu-core
	libclang-rt-14-dev stress-ng libcap-dev openssh-server
	qemu-system-x86 qemu-system-arm busybox-static cpio
	debhelper dpkg-dev fakeroot lintian man-db groff-base bash-completion python3-yaml)
# The cross compiler plus arm64 copies of the libraries we link statically.
# libelf.a needs libz.a; bookworm's libelf is built without zstd, but newer
# elfutils link it, so libzstd-dev keeps -lzstd working everywhere. The cross
# gcc finds libc6-dev:arm64 via multiarch paths (no libc6-dev-arm64-cross).
# BPF code needs nothing arm64-specific: clang and libbpf headers are neutral.
# libc6:arm64 also gives `make vmtest`'s arm64 guests their loader and libc.
CROSS_PKGS=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6:arm64 libc6-dev:arm64
	libbpf-dev:arm64 libelf-dev:arm64 zlib1g-dev:arm64 libzstd-dev:arm64
	libdw-dev:arm64 liblzma-dev:arm64 libbz2-dev:arm64 libinih-dev:arm64
	libcap-dev:arm64)
# The overhead suite's workload and peers (tests/bench/suite.py): stress-ng
# --vm, a bpftrace script and perf record on the page tracepoints.
BENCH_PKGS=(stress-ng bpftrace linux-perf)

stage() { echo "install-deps: $*"; }

if [ "$CROSS" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	stage "adding dpkg architecture arm64"
	dpkg --add-architecture arm64
fi

stage "apt-get update"
"${APT[@]}" update

stage "installing native packages"
"${APT_INSTALL[@]}" "${NATIVE[@]}" >/dev/null

# The Kubernetes manifest's schema check (test_deploy.py): the API's schemas
# as kubernetes-models ships them, compiled, for offline validation. Node.js
# from Debian unless the machine has one (its npm comes with it).
K8S_MODELS=kubernetes-models@4.5.1
if ! command -v npm >/dev/null; then
	stage "installing nodejs and npm"
	"${APT_INSTALL[@]}" nodejs npm >/dev/null
fi
if ! npm ls -g --depth=0 "$K8S_MODELS" >/dev/null 2>&1; then
	stage "installing $K8S_MODELS (npm, global)"
	npm install -g --no-audit --no-fund --loglevel=error "$K8S_MODELS" >/dev/null
fi

if [ "$CROSS" = 1 ]; then
	stage "installing arm64 cross packages"
	"${APT_INSTALL[@]}" "${CROSS_PKGS[@]}" >/dev/null
fi

if [ "$BENCH" = 1 ]; then
	stage "installing benchmark packages"
	"${APT_INSTALL[@]}" "${BENCH_PKGS[@]}" >/dev/null
fi

stage "done"
