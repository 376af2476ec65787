#!/usr/bin/env bash
# Install umtrace's build/test dependencies on Debian bookworm (run as root).
# Usage: scripts/install-deps.sh [--cross]
#   --cross  also install what a static arm64 cross-build needs.
# Safe to rerun: apt-get skips what is installed, the arch is added once.
set -euo pipefail

CROSS=0
case ${1:-} in
'') ;;
--cross) CROSS=1 ;;
*) echo "usage: $0 [--cross]" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "install-deps: must run as root" >&2; exit 1; }

# No prompts and no recommends: this runs unattended (CI, fresh VMs), where
# something else (unattended-upgrades) may briefly hold the dpkg lock.
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -qq -o DPkg::Lock::Timeout=300)
APT_INSTALL=("${APT[@]}" install -y --no-install-recommends)

NATIVE=(make gcc g++ clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
	libzstd-dev libdw-dev liblzma-dev libbz2-dev pkg-config python3 procps
	file util-linux libinih-dev prometheus
	chromium libxml2-utils protobuf-compiler python3-jsonschema fonts-dejavu-core
	libclang-rt-14-dev stress-ng)
# The cross compiler plus arm64 copies of the libraries we link statically.
# libelf.a needs libz.a; bookworm's libelf is built without zstd, but newer
# elfutils link it, so libzstd-dev keeps -lzstd working everywhere. The cross
# gcc finds libc6-dev:arm64 via multiarch paths (no libc6-dev-arm64-cross).
# BPF code needs nothing arm64-specific: clang and libbpf headers are neutral.
CROSS_PKGS=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev:arm64
	libbpf-dev:arm64 libelf-dev:arm64 zlib1g-dev:arm64 libzstd-dev:arm64
	libdw-dev:arm64 liblzma-dev:arm64 libbz2-dev:arm64 libinih-dev:arm64)

stage() { echo "install-deps: $*"; }

if [ "$CROSS" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	stage "adding dpkg architecture arm64"
	dpkg --add-architecture arm64
fi

stage "apt-get update"
"${APT[@]}" update

stage "installing native packages"
"${APT_INSTALL[@]}" "${NATIVE[@]}" >/dev/null

if [ "$CROSS" = 1 ]; then
	stage "installing arm64 cross packages"
	"${APT_INSTALL[@]}" "${CROSS_PKGS[@]}" >/dev/null
fi

stage "done"
