# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Files of Debian packages, fetched with apt into a cache: sourced by
# scripts/vmtest.sh (kernels, libcuda1) and scripts/fetch-torch.sh
# (PyTorch's libraries). Packages that are not in this machine's sources
# (another release, non-free, contrib) are read through a private apt
# configuration with its own lists, which leaves the machine's sources and
# lists alone.
#
# The caller sets CACHE (where downloads are unpacked) and PAPT_DIR (the
# private apt state), defines papt_sources (prints the private
# sources.list) and note (prints a message), then calls papt_init.

# papt_init: the private configuration's and the machine's apt options.
papt_init() {
	PAPT=(-o "Dir::Etc::SourceList=$PAPT_DIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$PAPT_DIR/lists" -o "Dir::Cache=$PAPT_DIR/cache"
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
		-o APT::Architectures::=amd64 -o APT::Architectures::=arm64
		-o APT::Sandbox::User=root)
	SYSAPT=(-o APT::Sandbox::User=root)
}

papt_update() {
	mkdir -p "$PAPT_DIR/lists/partial" "$PAPT_DIR/cache/archives/partial"
	papt_sources >"$PAPT_DIR/sources.list"
	note "updating the private apt lists in $PAPT_DIR"
	apt-get -qq "${PAPT[@]}" update >/dev/null
}

# apt_with p|s TOOL ARGS...: apt-get or apt-cache with the private
# configuration (p) or the machine's (s).
apt_with() {
	local src=$1 tool=$2
	shift 2
	if [ "$src" = p ]; then
		"$tool" "${PAPT[@]}" "$@"
	else
		"$tool" "${SYSAPT[@]}" "$@"
	fi
}

# newest_pkg p|s REGEX: the newest package name apt knows matching REGEX.
newest_pkg() {
	apt_with "$1" apt-cache search --names-only "$2" 2>/dev/null |
		cut -d' ' -f1 | sort -V | tail -n1
}

# pkg_version p|s PKG[:ARCH]: the version apt would fetch ("" if none).
pkg_version() {
	apt_with "$1" apt-cache show --no-all-versions "$2" 2>/dev/null |
		sed -n 's/^Version: //p' | head -n1
}

# download p|s PKG[:ARCH] DIR: the .deb of PKG's candidate, into DIR.
download() {
	(cd "$3" && apt_with "$1" apt-get -qq download "$2" >/dev/null)
}

# fetch_deb p|s PKG[:ARCH] OUTDIR PATTERN...: extract the files matching
# PATTERN (tar wildcards) of PKG's .deb into OUTDIR. The private lists are
# refreshed once when they are missing or name a file no longer there.
fetch_deb() {
	local src=$1 pkg=$2 out=$3 tmp
	shift 3
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/dl.XXXXXX")
	if ! download "$src" "$pkg" "$tmp"; then
		[ "$src" = p ] || { rm -rf "$tmp"; return 1; }
		papt_update && download p "$pkg" "$tmp" || { rm -rf "$tmp"; return 1; }
	fi
	mkdir -p "$tmp/x"
	dpkg-deb --fsys-tarfile "$tmp"/*.deb | tar -x -C "$tmp/x" --wildcards "$@"
	mkdir -p "$(dirname "$out")"
	rm -rf "$out"
	mv "$tmp/x" "$out"
	rm -rf "$tmp"
}
