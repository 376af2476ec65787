#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# check_exports.sh LIB: check a built fake libcuda.so.1 is fit to be traced.
#  - every entry point in FAKECUDA_API_LIST (cuda_fake.h) is an exported
#    function, and only cu* / fakecuda_* symbols are exported;
#  - no entry point starts with a LOCK-prefixed instruction (x86 uprobes
#    refuse those: the probe would be silently missing);
#  - both cuMemAllocFromPoolAsync variants call cuMemAllocAsync through
#    the PLT (so its probe fires nested), not by a local call or jump.
# Needs nm and objdump (binutils). Exit status 0 when all hold.
set -euo pipefail

lib=${1:?usage: check_exports.sh path/to/libcuda.so.1}
hdr=$(dirname "$0")/cuda_fake.h
fail=0

bad() {
	echo "check_exports: $*" >&2
	fail=1
}

exports=$(nm -D --defined-only "$lib" | awk '{ print $2, $3 }')
apis=$(sed -n 's/^[[:space:]]*X(\([A-Za-z0-9_]*\)).*/\1/p' "$hdr")
[ -n "$apis" ] || bad "no entry points found in $hdr"

for api in $apis; do
	grep -qx "T $api" <<<"$exports" || bad "$api is not an exported function"
done
for sym in $(awk '{ print $2 }' <<<"$exports"); do
	case $sym in
	cu* | fakecuda_*) ;;
	*) bad "unexpected export: $sym" ;;
	esac
done

dis=$(objdump -d --no-show-raw-insn "$lib")
for api in $apis; do
	first=$(awk -v f="<$api>:" '$2 == f { getline; print; exit }' <<<"$dis")
	case $first in
	*lock*) bad "$api starts with a LOCK prefix: $first" ;;
	"") bad "$api: no code found" ;;
	esac
done

for api in cuMemAllocFromPoolAsync cuMemAllocFromPoolAsync_ptsz; do
	body=$(awk -v f="<$api>:" '$2 == f { on = 1; next } on && /^$/ { exit } on' <<<"$dis")
	grep -q 'call.*<cuMemAllocAsync@plt>' <<<"$body" ||
		bad "$api does not call cuMemAllocAsync through the PLT"
done

[ $fail -eq 0 ] && echo "check_exports: $lib ok"
exit $fail
