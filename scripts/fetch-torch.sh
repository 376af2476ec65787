#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Debian's real PyTorch builds for tests/integration/test_real_torch.py,
# fetched once into ${XDG_CACHE_HOME:-~/.cache}/umtrace/torch (as root;
# scripts/install-deps.sh --test runs it):
#   trixie-amd64/      a trixie root (mmdebstrap) with python3-torch 2.6,
#                      CPU: the 2.x build, run on this bookworm host in a
#                      chroot, since it needs trixie's Python and libraries
#   libs/PKG-ARCH/VER/ the libc10 files of libtorch-cuda-2.6 (amd64, from
#                      contrib: libc10_cuda.so calls the hook), and
#                      libtorch2.6 and libtorch1.13 for arm64: symbol and
#                      call-site checks only
# The 1.x build that runs (1.13.1, bookworm's python3-torch) is the
# machine's own, installed by install-deps.sh --test. A part already
# cached is kept; one apt cannot fetch is left out, and the tests that
# need it say SKIP.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/umtrace/torch
MIRROR=http://deb.debian.org/debian
note() { echo "fetch-torch: $*" >&2; }

PAPT_DIR=$CACHE/apt
papt_sources() {
	local keys=/usr/share/keyrings/debian-archive-keyring.gpg
	cat <<-EOF
	deb [arch=amd64,arm64 signed-by=$keys] $MIRROR trixie main contrib
	deb [arch=amd64,arm64 signed-by=$keys] $MIRROR bookworm main
	EOF
}
# shellcheck source=scripts/debfetch.sh
. "$ROOT/scripts/debfetch.sh"
papt_init

# libs PKG ARCH: the libc10 files of PKG's newest version for ARCH.
libs() {
	local pkg=$1 da=$2 ver dir t0=$SECONDS
	ver=$(pkg_version p "$pkg:$da")
	[ -n "$ver" ] || { note "apt has no $pkg:$da: left out"; return 0; }
	dir=$CACHE/libs/$pkg-$da/$ver
	ls "$dir"/usr/lib/*/libc10.so.* >/dev/null 2>&1 && return 0
	note "fetching $pkg:$da $ver"
	fetch_deb p "$pkg:$da" "$dir" './usr/lib/*/libc10*.so.*' ||
		{ note "cannot fetch $pkg:$da: left out"; return 0; }
	note "$pkg:$da: $((SECONDS - t0)) s"
}

# chroot_root: trixie with python3-torch, built aside and moved in whole,
# so that a root in the cache is always complete.
chroot_root() {
	local dir=$CACHE/trixie-amd64 tmp t0=$SECONDS
	[ "$(dpkg --print-architecture)" = amd64 ] || { note "not amd64: no trixie root"; return 0; }
	[ -x "$dir/usr/bin/python3" ] && return 0
	command -v mmdebstrap >/dev/null ||
		{ note "no mmdebstrap (install-deps.sh --test installs it): no trixie root"; return 0; }
	note "building a trixie root with python3-torch in $dir (about 1.2 GB)"
	tmp=$(mktemp -d "$CACHE/root.XXXXXX")
	if ! mmdebstrap --quiet --variant=essential --include=python3-torch \
		--components=main trixie "$tmp" "$MIRROR" >&2; then
		rm -rf "$tmp"
		note "mmdebstrap failed: no trixie root"
		return 0
	fi
	rm -rf "$dir"
	mv "$tmp" "$dir"
	note "trixie root: $((SECONDS - t0)) s, $(du -sh "$dir" | cut -f1)"
}

[ "$(id -u)" = 0 ] || { note "must run as root"; exit 1; }
mkdir -p "$CACHE"
papt_update || note "cannot update the private apt lists: using what is cached"
libs libtorch-cuda-2.6 amd64
libs libtorch2.6 arm64
libs libtorch1.13 arm64
chroot_root
