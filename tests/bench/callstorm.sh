#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# callstorm.sh OUT [CALLS]: can umtrace's user space keep up with a storm
# of GPU calls? Runs alloc_mix (4 KiB cuMemAlloc_v2 + cuMemFree_v2 pairs on
# 2 threads through the fake libcuda) under `umtrace report` (which
# symbolizes every call and keeps the attribution table) and `umtrace
# trace --json`, and prints the call rate, records lost, umtrace's CPU
# time and its peak RSS. Needs root.
set -euo pipefail

out=${1:?usage: callstorm.sh OUT [CALLS]}
calls=${2:-1000000}
iters=$((calls / 4))	# 2 threads, alloc + free per iteration
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {
	local name=$1
	shift
	"$out/tests/alloc_mix" -d 1500 -t 2 -n "$iters" -s 4K -a alloc -F \
		-o "$tmp/truth.json" 2>"$tmp/pid" &
	local job=$!
	/usr/bin/time -f "%e %U %S %M" -o "$tmp/time" \
		"$out/umtrace" "$@" --libcuda "$out/tests/libcuda.so.1" -p "$job" \
		>"$tmp/out" 2>"$tmp/err"
	wait "$job"
	python3 - "$name" "$tmp" <<'PY'
import json, sys
name, tmp = sys.argv[1], sys.argv[2]
wall, user, sys_s, rss = open(f"{tmp}/time").read().split()
lines = [json.loads(l) for l in open(f"{tmp}/out") if l.startswith("{")]
tot = [l for l in lines if l.get("event") == "totals"][-1]
truth = json.load(open(f"{tmp}/truth.json"))
made = sum(c["calls"] for a, c in truth["calls"].items() if a != "cuInit")
secs = float(wall) - 1.5
print(f"{name:8} {made:9d} calls  {made / secs:9.0f} calls/s  "
      f"{tot['records']:9d} seen  {tot['dropped']:6d} lost  "
      f"cpu {float(user) + float(sys_s):6.2f} s  peak RSS {int(rss) / 1024:5.1f} MiB")
PY
}

command -v /usr/bin/time >/dev/null || { echo "callstorm.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
run report report --json
run trace trace --json
