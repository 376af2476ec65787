#!/usr/bin/env bash
# Regenerate the committed CO-RE headers vmlinux/{x86,arm64}/vmlinux.h.
# Usage: scripts/gen-vmlinux.sh [x86|arm64|all]   (default: all)
# x86 comes from the running kernel's BTF; arm64 from Debian's arm64 kernel
# image package (needs root for dpkg/apt). Output is bpftool's, untouched.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${1:-all}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

log() { echo "gen-vmlinux: $*" >&2; }
die() { log "error: $*"; exit 1; }

# Fail early if the header lacks what umtrace's BPF code relies on.
check_header() {
	local h=$1 sym
	for sym in 'struct task_struct {' 'btf_trace_mm_page_alloc' 'struct pt_regs {'; do
		grep -qF "$sym" "$h" || die "$h lacks '$sym'"
	done
}

# Write via a temp file so a failed dump never clobbers the committed header.
dump_btf() {
	local btf=$1 out=$2
	mkdir -p "$(dirname "$out")"
	bpftool btf dump file "$btf" format c >"$TMP/out.h"
	check_header "$TMP/out.h"
	mv "$TMP/out.h" "$out"
	log "wrote $out ($(wc -c <"$out") bytes)"
}

gen_x86() {
	# Host BTF describes the host arch only; refuse to mislabel it.
	[ "$(uname -m)" = x86_64 ] || die "x86 header needs an x86_64 host"
	[ -r /sys/kernel/btf/vmlinux ] || die "no /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF?)"
	log "x86: from running kernel $(uname -r)"
	dump_btf /sys/kernel/btf/vmlinux "$ROOT/vmlinux/x86/vmlinux.h"
}

# Print $3 bytes of file $1 from offset $2 (dd, not tail|head: pipefail
# would trip on the SIGPIPE that head gives tail).
bytes() { dd if="$1" bs=1M iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none; }

# Print the decompressed arm64 Image of vmlinuz $1 to stdout.
decompress_vmlinuz() {
	local z=$1 magic
	magic=$(head -c 4 "$z" | od -An -tx1 | tr -d ' \n')
	case $magic in
	1f8b*) gzip -dc "$z" ;;
	fd377a58) xz -dc "$z" ;;
	28b52ffd) zstd -dc "$z" ;;
	4d5a*)
		# PE image: either a plain Image (EFI stub, "ARMd" at 0x38) or an
		# EFI zboot image ("zimg" at 4; payload offset/size at 8/12,
		# compression name at 24).
		if [ "$(bytes "$z" 4 4)" = zimg ]; then
			local off size comp
			off=$(od -An -tu4 -j8 -N4 "$z" | tr -d ' ')
			size=$(od -An -tu4 -j12 -N4 "$z" | tr -d ' ')
			comp=$(bytes "$z" 24 32 | tr -d '\0')
			log "arm64: vmlinuz is an EFI zboot image ($comp payload)"
			bytes "$z" "$off" "$size" >"$TMP/payload"
			case $comp in
			gzip) gzip -dc "$TMP/payload" ;;
			xz) xz -dc "$TMP/payload" ;;
			zstd | zstd22) zstd -dc "$TMP/payload" ;;
			*) die "unsupported zboot compression '$comp'" ;;
			esac
		else
			cat "$z"
		fi
		;;
	*) die "unknown vmlinuz format: $(file -b "$z")" ;;
	esac
}

# Write every plausible BTF blob in Image $1 to $TMP/btf-N, largest first,
# and print their paths. The magic 9f eb 01 00 also occurs by chance, so the
# header is validated and bpftool has the final word.
find_btf() {
	python3 - "$1" "$TMP" <<'EOF'
import struct, sys
data = open(sys.argv[1], 'rb').read()
found, i = [], data.find(b'\x9f\xeb\x01\x00')
while i >= 0:
    if i + 24 <= len(data):
        _, ver, _, hl, toff, tlen, soff, slen = struct.unpack_from('<HBBIIIII', data, i)
        end = hl + max(toff + tlen, soff + slen)
        if ver == 1 and hl == 24 and tlen and slen and i + end <= len(data):
            found.append((end, i))
    i = data.find(b'\x9f\xeb\x01\x00', i + 1)
for n, (end, i) in enumerate(sorted(found, reverse=True)):
    path = '%s/btf-%d' % (sys.argv[2], n)
    open(path, 'wb').write(data[i:i + end])
    print(path)
EOF
}

gen_arm64() {
	# arm64 packages are only visible to apt once the architecture is added.
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		log "arm64: adding dpkg architecture arm64"
		dpkg --add-architecture arm64
	fi
	log "arm64: apt-get update"
	apt-get update -qq
	# The metapackage only depends on the versioned image package.
	local pkg
	pkg=$(apt-cache depends linux-image-arm64:arm64 |
		sed -n '/^ *Depends: linux-image-/{s/^ *Depends: \([^ :]*\).*/\1/p;q}')
	[ -n "$pkg" ] || die "cannot resolve linux-image-arm64 to a concrete package"
	log "arm64: downloading $pkg"
	# apt's _apt sandbox user must reach the download dir, else apt warns.
	chmod 755 "$TMP"
	mkdir "$TMP/deb"
	chown _apt "$TMP/deb" 2>/dev/null || chmod 777 "$TMP/deb"
	(cd "$TMP/deb" && apt-get download -qq "$pkg:arm64")
	dpkg-deb -x "$TMP"/deb/*.deb "$TMP/root"
	local z
	z=$(find "$TMP/root/boot" -name 'vmlinuz-*' -print -quit)
	[ -n "$z" ] || die "no /boot/vmlinuz-* in $pkg"
	log "arm64: $(basename "$z"): $(file -b "$z" | cut -c1-60)"
	decompress_vmlinuz "$z" >"$TMP/Image"
	local ver
	# linux_banner is the copy with the build number (#1); others lack it.
	ver=$(grep -aoE 'Linux version [0-9][[:print:]]* #[0-9][[:print:]]*' "$TMP/Image" | sed -n 1p || true)
	log "arm64: ${ver:-kernel version string not found}"
	local blob
	for blob in $(find_btf "$TMP/Image"); do
		if bpftool btf dump file "$blob" >/dev/null 2>&1; then
			log "arm64: BTF blob $(wc -c <"$blob") bytes"
			dump_btf "$blob" "$ROOT/vmlinux/arm64/vmlinux.h"
			return
		fi
	done
	die "no parseable BTF in $z (kernel built without CONFIG_DEBUG_INFO_BTF?)"
}

case $TARGET in
x86) gen_x86 ;;
arm64) gen_arm64 ;;
all) gen_x86 && gen_arm64 ;;
*) die "usage: $0 [x86|arm64|all]" ;;
esac
