#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# umtrace's guest suite: run by scripts/vmtest.sh as root inside a qemu
# guest (busybox sh), with the static umtrace on PATH, the fake libcuda and
# the workloads in /t, NVIDIA's real libcuda.so.1 in /nvidia, Debian's
# real libc10 files of PyTorch in /torch.
#
# One line per check, "ok NAME" or "not ok NAME: why" (and "# " lines of
# information: what `umtrace check` said, how long each check took), then
# one line for the host: "vmtest-suite: PASS N", "vmtest-suite: FAIL F of N
# checks failed: NAMES", or "vmtest-suite: REFUSED LINE" when umtrace
# refuses the kernel (too old) with the one line LINE from every command.
# Every wait has a deadline; no time is asserted: a TCG guest is 10 to 50
# times slower than the host, and unevenly so.

T=/t
FAKE=$T/libcuda.so.1
REAL=/nvidia/libcuda.so.1
W=/tmp/suite
MIB=1048576
# Seconds a umtrace command may take here: 2 to 20 s is usual under TCG,
# far more when the host is busy with other work.
LONG=300

mkdir -p $W
npass=0
nfail=0
failed=

ok() { echo "ok $1"; npass=$((npass + 1)); }
not_ok() { echo "not ok $1: $2"; nfail=$((nfail + 1)); failed="$failed $1"; }

# check NAME FUNC [ARGS...]: FUNC prints why it failed and returns non-zero.
check() {
	name=$1
	shift
	t0=$(date +%s)
	if why=$("$@" 2>&1); then
		ok "$name"
	else
		not_ok "$name" "$(echo "$why" | tail -n 4 | tr '\n' ' ')"
	fi
	echo "# $name: $(($(date +%s) - t0)) s"
}

# wait_until SECS CMD...: poll CMD until it succeeds, for SECS at most.
wait_until() {
	end=$(($(date +%s) + $1))
	shift
	while ! "$@"; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.1
	done
}

state_of() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
# A child that ended is a zombie until it is waited for.
ended() { st=$(state_of "$1"); [ -z "$st" ] || [ "$st" = Z ]; }

# major * 1000 + minor of the running kernel
kver() { uname -r | awk -F. '{ print $1 * 1000 + $2 }'; }

# Reading umtrace's JSON lines: num(KEY) and str(KEY) of the line.
AWKLIB='
function num(k) {
	if (!match($0, "\"" k "\":-?[0-9]+"))
		return -1
	return substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3) + 0
}
function str(k) {
	if (!match($0, "\"" k "\":\"[^\"]*\""))
		return ""
	return substr($0, RSTART + length(k) + 4, RLENGTH - length(k) - 5)
}
BEGIN {
	# the entry points that take their whole size in host pages in the call
	_n = split("cuMemAlloc_v2 cuMemAlloc cuMemAllocPitch_v2 cuMemAllocPitch " \
		   "cuMemAllocHost_v2 cuMemAllocHost cuMemHostAlloc cuMemAllocAsync " \
		   "cuMemAllocAsync_ptsz cuMemAllocFromPoolAsync " \
		   "cuMemAllocFromPoolAsync_ptsz cuMemCreate", _p, " ")
	for (_i = 1; _i <= _n; _i++)
		pop[_p[_i]] = 1
}
'
# jawk [-v VAR=VALUE]... PROG FILE...: awk with the functions above
jawk() {
	opts=
	while [ "$1" = -v ]; do
		opts="$opts -v $2"
		shift 2
	done
	prog=$1
	shift
	# shellcheck disable=SC2086 # one word per option
	awk $opts "$AWKLIB$prog" "$@"
}

# ---- a kernel umtrace does not support ----

# refusal CMD...: umtrace must exit 1 with one line naming what is missing.
refusal() {
	timeout 120 "$@" >$W/refuse.out 2>$W/refuse.err
	rc=$?
	[ "$rc" = 1 ] || { echo "$*: exit $rc, want 1: $(tail -n 2 $W/refuse.err)"; return 1; }
	[ "$(wc -l <$W/refuse.err)" = 1 ] || { echo "$*: $(wc -l <$W/refuse.err) lines on stderr, want 1"; return 1; }
	grep -q 'kernel too old' $W/refuse.err || { echo "$*: $(cat $W/refuse.err)"; return 1; }
}

refused_everywhere() {
	line=$(cat $W/check.err)
	check refuse_trace refusal umtrace trace --libcuda $FAKE -- alloc_mix -o /dev/null
	check refuse_top refusal umtrace top --once -i 1s --libcuda $FAKE
	check refuse_record refusal umtrace record -o $W/refused.umt --libcuda $FAKE -- true
	check refuse_guard refusal umtrace guard --libcuda $FAKE --state-file $W/refused.state
	if [ "$nfail" = 0 ]; then
		echo "vmtest-suite: REFUSED $line"
	else
		echo "vmtest-suite: FAIL $nfail of $((npass + nfail)) checks failed:$failed"
	fi
	exit 0
}

# ---- every program verifies ----

verify_all() {
	[ "$CHECK_RC" = 0 ] && ! grep -q FAILED $W/check.out && return 0
	echo "exit $CHECK_RC: $(grep -v ' ok' $W/check.out $W/check.err | tr '\n' ';' | cut -c 1-400)"
	return 1
}

# ---- trace ----

# Ground truth (alloc_mix's JSON) and the traced calls, one line per entry
# point: "API CALLS FAILED".
truth_counts() {
	sed -n 's/^ *"\(cu[A-Za-z0-9_]*\)": {"calls": \([0-9]*\), "bytes": [0-9]*, "failed": \([0-9]*\)}.*/\1 \2 \3/p' "$1" |
		grep -v -e '^cuInit ' -e '^cuMemSetAccess ' | sort
}
traced_counts() {
	jawk '/"event":"(alloc|free)"/ { a = str("api"); n[a]++; f[a] += num("ret") != 0 }
	      END { for (a in n) print a, n[a], f[a] }' "$1" | sort
}

# The calls of populating entry points that succeeded, by the ground truth.
populating_ok() {
	truth_counts "$1" | jawk '$1 in pop { n += $2 - $3 } END { print n + 0 }'
}

# calls_seen OUT TRUTH: every call the workload made, once, failed where it
# failed, nothing lost. The fake has no 32-bit mappings on arm64: there its
# v1 allocations fail (not supported) and no cuMemFree (v1) is ever made.
calls_seen() {
	want_eps=26
	[ "$(uname -m)" = x86_64 ] || want_eps=25
	truth_counts "$2" >$W/want
	traced_counts "$1" >$W/got
	cmp -s $W/want $W/got ||
		{ echo "traced vs made (API calls failed):"; diff $W/want $W/got | grep '^[-+]c' | head -n 4; return 1; }
	[ "$(wc -l <$W/want)" = $want_eps ] ||
		{ echo "$(wc -l <$W/want) entry points exercised, want $want_eps"; return 1; }
	jawk '/"event":"totals"/ { t = 1; if (num("dropped") != 0) { print "dropped", num("dropped"); exit 1 } }
	      END { if (!t) { print "no totals"; exit 1 } }' "$1"
}

trace_calls() {
	[ "$A_RC" = 0 ] || { echo "exit $A_RC: $(grep -v '^libbpf' $W/a.err | tail -n 2)"; return 1; }
	calls_seen $W/a.out $W/a.json
}

# Each populating call is charged its own size in host pages, within 2%.
trace_host_bytes() {
	jawk -v want="$(populating_ok $W/a.json)" '
	/"event":"alloc"/ && (str("api") in pop) && num("ret") == 0 {
		n++
		s = num("size"); h = num("host_bytes")
		if (h < s * 0.98 || h > s * 1.02) {
			print str("api"), "tid", num("tid") ":", h, "host bytes for", s
			bad++
		}
	}
	END {
		if (n != want) { print "checked", n, "calls, want", want; bad++ }
		exit bad != 0
	}' $W/a.out
}

# Each free gives back what the allocation before it in its thread took
# (-F): within 768 KiB, the pages that per-CPU LRU batches may still hold.
# The VMM pair cuMemUnmap + cuMemRelease together give back cuMemCreate's.
trace_frees() {
	jawk -v want="$(populating_ok $W/a.json)" '
	function done(t,   d) {
		if (size[t] > 0) {
			d = got[t] - size[t]
			if (d < -786432 || d > 786432) {
				print "after", api[t], "tid", t ":", got[t], "freed for", size[t]
				bad++
			}
			n++
		}
		size[t] = 0; got[t] = 0
	}
	/"event":"alloc"/ {
		t = num("tid"); a = str("api")
		if ((a in pop) && num("ret") == 0) { done(t); size[t] = num("size"); api[t] = a }
		else if (a != "cuMemMap" && a != "cuMemAddressReserve") done(t)
	}
	/"event":"free"/ {
		got[num("tid")] += num("host_freed_bytes")
		if (num("ret") != 0) { print str("api"), "ret", num("ret"); bad++ }
	}
	/"event":"totals"/ && (num("unfreed") != 0 || num("unmatched_frees") != 0) {
		print "unfreed", num("unfreed"), "unmatched frees", num("unmatched_frees"); bad++
	}
	END {
		for (t in size) done(t)
		if (n != want) { print "checked", n, "frees, want", want; bad++ }
		exit bad != 0
	}' $W/a.out
}

# VMM: cuMemMap records the physical handle of a cuMemCreate; reserving and
# mapping take no pages.
trace_vmm() {
	jawk '
	/"event":"alloc"/ && str("api") == "cuMemCreate" { create[num("handle")] = 1; nc++ }
	/"event":"alloc"/ && str("api") == "cuMemMap" { map[num("aux")] = 1; nm++ }
	/"event":"alloc"/ && (str("api") == "cuMemMap" || str("api") == "cuMemAddressReserve") &&
	    num("host_bytes") >= 65536 { print str("api"), "took", num("host_bytes"); bad++ }
	END {
		if (!nc || nc != nm) { print nc, "creates,", nm, "maps"; bad++ }
		for (h in map) if (!(h in create)) { print "cuMemMap of handle", h, "no create made"; bad++ }
		exit bad != 0
	}' $W/a.out
}

# cuMemAllocFromPoolAsync(_ptsz) call cuMemAllocAsync inside the fake: one
# record each, charged once.
trace_nested() {
	direct=$(sed -n 's/^ *"cuMemAllocAsync": {"calls": \([0-9]*\), "bytes".*/\1/p' $W/a.json)
	inner=$(sed -n 's/^ *"cuMemAllocAsync": {"calls": \([0-9]*\), "failed".*/\1/p' $W/a.json)
	pools=$(sed -n 's/^ *"cuMemAllocFromPoolAsync\(_ptsz\)\{0,1\}": {"calls": \([0-9]*\), "bytes".*/\2/p' $W/a.json |
		awk '{ s += $1 } END { print s + 0 }')
	traced=$(grep -c '"event":"alloc","api":"cuMemAllocAsync"' $W/a.out)
	[ -n "$direct" ] && [ "$pools" -gt 0 ] && [ "$inner" = $((direct + pools)) ] ||
		{ echo "the fake did not nest: $inner inner calls for $direct + $pools"; return 1; }
	[ "$traced" = "$direct" ] || { echo "$traced cuMemAllocAsync records for $direct calls"; return 1; }
	jawk '/"event":"alloc","api":"cuMemAllocFromPoolAsync/ {
		n++; if (num("host_bytes") > num("size") * 1.02) { print "charged", num("host_bytes"), "for", num("size"); exit 1 } }
	      END { if (!n) { print "no pool records"; exit 1 } }' $W/a.out
}

# uprobes OUTPREFIX WANT: the attach path -v said it took.
uprobe_path() {
	grep -q "uprobes: $2" $W/$1.err || { echo "-v says: $(grep 'uprobes:' $W/$1.err)"; return 1; }
}

perf_event_uprobes() {
	UMTRACE_NO_UPROBE_MULTI=1 timeout $LONG umtrace trace -v --json --libcuda $FAKE -- \
		alloc_mix -s 1M -a all -F -o $W/b.json >$W/b.out 2>$W/b.err
	rc=$?
	[ "$rc" = 0 ] || { echo "exit $rc: $(grep -v '^libbpf' $W/b.err | tail -n 2)"; return 1; }
	uprobe_path b "one perf event per entry point" && calls_seen $W/b.out $W/b.json
}

# x86: pages CPU faults bring into managed memory are charged back to it.
managed_faults() {
	timeout $LONG umtrace trace --json --managed-faults --libcuda $FAKE -- \
		alloc_mix -n 2 -s 8M -a managed -F -o $W/m.json >$W/m.out 2>$W/m.err
	rc=$?
	[ "$rc" = 0 ] || { echo "exit $rc: $(tail -n 2 $W/m.err)"; return 1; }
	grep -q "\"managed_touched_bytes\": $((2 * 4 * MIB))," $W/m.json ||
		{ echo "workload: $(grep managed_touched $W/m.json)"; return 1; }
	jawk -v half=$((4 * MIB)) '/"event":"free","api":"cuMemFree_v2"/ {
		n++; f = num("faulted_bytes")
		if (f < half * 0.95 || f > half * 1.02) { print "faulted_bytes", f, "for", half; bad++ } }
	      END { if (n != 2) { print n, "frees, want 2"; bad++ } exit bad != 0 }' $W/m.out
}

# ---- top, record + report ----

top_once() {
	timeout $LONG umtrace top --once -i 1s --libcuda $FAKE >$W/top.out 2>$W/top.err
	rc=$?
	[ "$rc" = 0 ] || { echo "exit $rc: $(tail -n 2 $W/top.err)"; return 1; }
	grep -q '^umtrace top ' $W/top.out || { echo "no header: $(head -n 1 $W/top.out)"; return 1; }
}

record_report() {
	timeout $LONG umtrace record -o $W/rec.umt --libcuda $FAKE -- \
		alloc_mix -n 2 -s 2M -a alloc,hostalloc -F -o /dev/null >$W/rec.out 2>$W/rec.err
	rc=$?
	[ "$rc" = 0 ] || { echo "record: exit $rc: $(tail -n 2 $W/rec.err)"; return 1; }
	timeout $LONG umtrace report --json $W/rec.umt >$W/rep.out 2>$W/rep.err
	rc=$?
	[ "$rc" = 0 ] || { echo "report: exit $rc: $(tail -n 2 $W/rep.err)"; return 1; }
	jawk '/"event":"callsite"/ { calls[str("api")] += num("calls") }
	      /"event":"callsite","rank":[0-9]*,"api":"cuMemAlloc_v2"/ && /am_alloc_dev/ { named = 1 }
	      END {
		if (calls["cuMemAlloc_v2"] != 2 || calls["cuMemHostAlloc"] != 2) {
			print "callsites:", calls["cuMemAlloc_v2"] + 0, "cuMemAlloc_v2,",
			      calls["cuMemHostAlloc"] + 0, "cuMemHostAlloc calls, want 2 each"; exit 1 }
		if (!named) { print "cuMemAlloc_v2 stack does not name am_alloc_dev"; exit 1 }
	      }' $W/rep.out
}

# ---- guard ----

GUARD_PID=
HOG_PID=
BALLAST_PID=
guard_cleanup() {
	for p in $HOG_PID $BALLAST_PID; do
		kill -CONT "$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
	done
	[ -z "$GUARD_PID" ] || kill -INT "$GUARD_PID" 2>/dev/null
	[ -z "$GUARD_PID" ] || wait_until 60 ended "$GUARD_PID"
}

# The guard's state file lists pid's stop (with a reason the hog can have).
stop_told() {
	timeout 60 umtrace status --json --state-file $W/g.state >$W/status.json 2>&1 &&
		grep -qE "\"pid\":$1,[^}]*\"reason\":\"(admission|floor)\"" $W/status.json
}

# The floor is 1152 MiB below what is available; a ballast (no GPU call, so
# out of the guard's scope) takes 768 MiB of it; a hog of 8 x 64 MiB
# cuMemAlloc_v2 calls must be stopped at a call's entry, before the call,
# once the rest does not fit. Without the ballast the whole hog fits with
# 640 MiB to spare, more than the guard's kernel side keeps back for the
# per-CPU page lists (about 150 MiB on 6.12 here, whose lists grow at run
# time): once the ballast is gone, `umtrace resume` lets the hog finish.
guard_stop_resume() {
	kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
	floor=$((kb * 1024 - 1152 * MIB))
	umtrace guard -v --libcuda $FAKE --platform unified --state-file $W/g.state \
		--floor $floor --low $((floor + 64 * MIB)) --drop 1G >$W/g.out 2>$W/g.err &
	GUARD_PID=$!
	wait_until $LONG armed_or_ended $GUARD_PID
	grep -q 'guard: armed' $W/g.err || { echo "guard did not arm: $(tail -n 3 $W/g.err)"; return 1; }
	# Near the floor it decides from the kernel's own free-page counters.
	grep -qE "guard: deciding from the kernel's counters \(zones [1-9]" $W/g.err ||
		{ echo "no memory counters: $(grep 'guard:' $W/g.err | head -n 2)"; return 1; }
	grep -o 'guard: deciding from the kernel.*' $W/g.err >$W/zones.txt
	pagehog -c 4 -t 768 -w 600000 -o $W/ballast >/dev/null 2>&1 &
	BALLAST_PID=$!
	wait_until 120 grep -qsx 768 $W/ballast || { echo "ballast not in place"; return 1; }
	alloc_mix -n 8 -s 64M -a alloc -k -o $W/hog.json >$W/hog.out 2>&1 &
	HOG_PID=$!
	wait_until 120 is_state $HOG_PID T ||
		{ echo "hog not stopped (state $(state_of $HOG_PID)): $(tail -n 2 $W/g.err)"; return 1; }
	# A kernel stop is told once the guard has looked again (up to 200 ms).
	wait_until 30 stop_told $HOG_PID ||
		{ echo "status: $(cut -c 1-200 $W/status.json)"; return 1; }
	kill -KILL $BALLAST_PID
	wait $BALLAST_PID 2>/dev/null
	BALLAST_PID=
	timeout 60 umtrace resume --state-file $W/g.state $HOG_PID >$W/resume.out 2>&1 ||
		{ echo "resume: $(tail -n 1 $W/resume.out)"; return 1; }
	wait_until 120 ended $HOG_PID ||
		{ echo "hog did not finish (state $(state_of $HOG_PID)): $(grep 'guard:' $W/g.err | tail -n 3)"; return 1; }
	hog=$HOG_PID
	HOG_PID=
	wait $hog
	rc=$?
	[ "$rc" = 0 ] || { echo "hog exit $rc: $(tail -n 1 $W/hog.out)"; return 1; }
	grep -q '"cuMemAlloc_v2": {"calls": 8, "bytes": 536870912, "failed": 0}' $W/hog.json ||
		{ echo "hog: $(grep '"cuMemAlloc_v2"' $W/hog.json | head -n 1)"; return 1; }
	kill -INT $GUARD_PID
	wait_until 60 ended $GUARD_PID || { echo "guard did not exit on SIGINT"; return 1; }
	wait $GUARD_PID
	rc=$?
	GUARD_PID=
	[ "$rc" = 0 ] || { echo "guard exit $rc: $(tail -n 2 $W/g.err)"; return 1; }
	grep -qE "guard: stop pid=$hog .*reason=(admission|floor)" $W/g.err ||
		{ echo "no stop logged: $(grep 'guard:' $W/g.err | tail -n 2)"; return 1; }
}

armed_or_ended() { grep -q 'guard: armed' $W/g.err || ended "$1"; }

guard_check() {
	guard_stop_resume
	rc=$?
	guard_cleanup
	return $rc
}

# ---- NVIDIA's real libcuda.so.1, without a GPU ----

real_trace() {
	[ -f $REAL ] || { echo "no $REAL (libcuda1 was not fetched)"; return 1; }
	timeout $LONG umtrace trace -v --json --libcuda $REAL -- realcuda_calls $REAL \
		>$W/n.out 2>$W/n.err
	rc=$?
	[ "$rc" = 0 ] || { echo "exit $rc: $(grep -v '^libbpf' $W/n.err | tail -n 2)"; return 1; }
	grep -q "$REAL: 26 of 26 entry points probed" $W/n.err ||
		{ echo "$(grep 'entry points' $W/n.err | head -n 2)"; return 1; }
}

# ret_of API: what the caller got back, as realcuda_calls printed it.
ret_of() { sed -n "s/^$1 ret=\([0-9-]*\).*/\1/p" $W/n.out; }

# Each call's record: its arguments and the caller's return code, as a
# failure, with entry and return probes fired in NVIDIA's code.
real_calls() {
	[ "$(ret_of cuInit)" = 100 ] || echo "note: cuInit returned $(ret_of cuInit), not 100 (no device)"
	for api in cuMemAlloc_v2 cuMemHostAlloc cuMemFree_v2; do
		want=$(ret_of $api)
		[ -n "$want" ] && [ "$want" != 0 ] || { echo "$api: the caller got '$want'"; return 1; }
		jawk -v api=$api -v ret="$want" -v size=$MIB '
		str("api") == api && /"event":"(alloc|free)"/ {
			n++
			if (num("ret") != ret || str("end") != "returned") { print api, "ret", num("ret"), str("end"); exit 1 }
			if (api != "cuMemFree_v2" && num("size") != size) { print api, "size", num("size"); exit 1 }
			if (api == "cuMemHostAlloc" && num("flags") != 1) { print api, "flags", num("flags"); exit 1 }
			if (api == "cuMemFree_v2" && num("handle") != 2119692288) { print api, "handle", num("handle"); exit 1 }
		}
		str("api") == api && /"event":"summary"/ && (num("calls") != 1 || num("failed") != 1) {
			print api, "summary:", num("calls"), "calls,", num("failed"), "failed"; exit 1 }
		END { if (n != 1) { print api, n, "records"; exit 1 } }' $W/n.out || return 1
	done
}

# The entry probe fired at NVIDIA's own function: the record's first stack
# address is the symbol's, in the page offset.
real_entry() {
	[ -s /nvidia/offsets ] || { echo "no /nvidia/offsets"; return 1; }
	for api in cuMemAlloc_v2 cuMemHostAlloc cuMemFree_v2; do
		off=$(awk -v api=$api '$1 == api { print $2 }' /nvidia/offsets)
		pc=$(grep "\"api\":\"$api\"" $W/n.out | grep -v '"event":"summary"' |
			sed -n 's/.*"stack":\["\(0x[0-9a-f]*\)".*/\1/p' | head -n 1)
		[ -n "$off" ] && [ -n "$pc" ] || { echo "$api: offset '$off', stack '$pc'"; return 1; }
		[ $((pc & 0xfff)) = $((off & 0xfff)) ] ||
			{ echo "$api: entry at $pc, the symbol is at $off in the file"; return 1; }
	done
}

# Debian's real libc10 files of this arch (/torch, with the hook's form in
# each as binutils read it on the host): umtrace's ELF reader finds the
# same form, and the hook is probed there.
real_libc10() {
	while read -r f form; do
		timeout $LONG umtrace report -v -d 200ms --libcuda $FAKE --libc10 /torch/$f \
			>$W/c10.out 2>$W/c10.err || { tail -n 3 $W/c10.err; return 1; }
		grep -qF "/torch/$f: PyTorch's allocator hook, $form: with the allocator's totals" \
			$W/c10.err || { echo "$f: $form not named"; tail -n 3 $W/c10.err; return 1; }
		grep -qF "probing PyTorch's allocator hook (1 form) in /torch/$f" $W/c10.err ||
			{ echo "$f: not probed"; return 1; }
		echo "# $f: $form"
	done </torch/forms
}

# ---- the fake NVIDIA driver (tests/fakedriver) ----
#
# Each shape of the real driver, run under umtrace, its figures printed
# beside the module's own counters (/proc/fakenv, in base pages). What
# umtrace gets right is asserted to the page, and the figures are printed
# as "# fakedriver ..." lines.

FNV_KO=/fakedriver/$(uname -r)/nvidia.ko
FNV_POOLS=/sys/module/nvidia/parameters/pools
# Pages a run's calls may take beyond those the driver counts, each of them
# really taken in a call: the slab pages behind the driver's handle table
# and chunk array (xarray, kvzalloc) in a process's first call (5 on x86,
# 2 to 5 on arm64; every later call is exact), and the job's page-table
# pages the BH thread fills (up to 4). A call may also free a page the
# driver does not count (one seen once on arm64 6.1, in the retry's call).
FNV_SLACK=8

fnv_info() { echo "fakedriver $*" >>$W/fnv.info; }
fnv_snap() { cat /proc/fakenv >"$W/fnv.$1"; }
# fnv_delta NAME A B: the change of a counter from snapshot A to B
fnv_delta() {
	awk -v k="$1" '$1 == k { v[FILENAME] = $2 } END { print v[ARGV[2]] - v[ARGV[1]] }' \
		"$W/fnv.$2" "$W/fnv.$3"
}
fnv_at() { awk -v k="$1" '$1 == k { print $2 }' "$W/fnv.$2"; }
fnv_clean() { [ "$(awk '$1 == "pool_dirty" { print $2 }' /proc/fakenv)" = 0 ]; }
# usum OUT API FIELD: FIELD summed over API's records, in pages
usum() {
	jawk -v api="$2" -v f="$3" -v pg="$FNV_PG" '
	/"event":"(alloc|free)"/ && str("api") == api { s += num(f) }
	END { printf "%d\n", s / pg }' "$1"
}
# near GOT WANT: umtrace counted the driver's pages, and at most the slack more
near() { [ "$1" -ge "$2" ] && [ "$1" -le $(($2 + FNV_SLACK)) ]; }

# fnv_run NAME OUT [VAR=VALUE...] -- UMTRACE_ARGS...: umtrace with the fake
# libcuda in driver mode, counters snapshotted around it as NAME.0, NAME.1
fnv_run() {
	name=$1 out=$2
	shift 2
	fnv_snap "$name.0"
	env FAKECUDA_DRIVER=/dev/fakenv "$@" >"$W/$out.out" 2>"$W/$out.err"
	rc=$?
	wait_until 60 fnv_clean
	fnv_snap "$name.1"
	[ "$rc" = 0 ] || { echo "exit $rc: $(grep -v '^libbpf' "$W/$out.err" | tail -n 2)"; return 1; }
}

fnv_load() {
	insmod "$FNV_KO" || return 1
	[ -c /dev/fakenv ] && [ -r /proc/fakenv ] || { echo "no /dev/fakenv or /proc/fakenv"; return 1; }
	# the driver's threads, by their comms (cut to 15 characters, or whole
	# where /proc gives a kernel thread's full name)
	cat /proc/[0-9]*/comm >$W/comms 2>/dev/null
	for c in nv_mem_pool_scr 'UVM GPU0 BH'; do
		grep -q "^$c" $W/comms || { echo "no thread $c"; return 1; }
	done
	# as the real driver: what --device-nodes auto looks for
	grep -q '^NVRM version: ' /proc/driver/nvidia/version ||
		{ echo "no /proc/driver/nvidia/version"; return 1; }
}

# Eager, in the caller, nothing pooled: 4 x 8 MiB of 2 MiB pages, the first
# page size of each call failing half way (its pages freed in the call).
fnv_eager() {
	echo 0 >$FNV_POOLS
	fnv_run e fe FAKECUDA_DRIVER_RETRY=1 timeout $LONG umtrace trace --json --libcuda $FAKE -- \
		alloc_mix -n 4 -s 8M -a alloc -F -o $W/fe.json || return 1
	taken=$(fnv_delta taken e.0 e.1); retried=$(fnv_delta retried e.0 e.1)
	freed=$(fnv_delta freed e.0 e.1)
	up=$(usum $W/fe.out cuMemAlloc_v2 host_bytes)
	back=$(usum $W/fe.out cuMemAlloc_v2 host_freed_bytes)
	down=$(usum $W/fe.out cuMemFree_v2 host_freed_bytes)
	fnv_info "eager: driver took $((taken + retried)) pages in the calls ($retried of them freed there), freed $freed at the frees;" \
		"umtrace HOST+ $up, HOST- $back in the calls, HOST- $down at the frees"
	near "$up" $((taken + retried)) || { echo "HOST+ $up pages, the driver took $((taken + retried))"; return 1; }
	near "$back" "$retried" || { echo "HOST- in the calls $back pages, the driver freed $retried"; return 1; }
	[ "$down" = "$freed" ] || { echo "HOST- at the frees $down pages, the driver freed $freed"; return 1; }
}

# The pool: 4 x 8 MiB allocated and freed in turn. The first call takes
# new pages, the later ones are served from the pool; every free keeps its
# pages; after the job the pool holds them until the shrinker is asked.
# trace names what went in and out and what the pool holds after the job;
# a live report watching the host across the job and the shrinker's
# return (drop_caches) counts what came back, to the page.
fnv_pool() {
	echo 1 >$FNV_POOLS
	echo 2 >/proc/sys/vm/drop_caches	# an empty pool to begin with
	timeout -s INT $LONG umtrace report -v --json --libcuda $FAKE >$W/fpr.out 2>$W/fpr.err &
	rpid=$!
	# a guard far from its floor, its page programs attached for good (what
	# its figure of the pool needs): its status says what the pool holds
	umtrace guard -v --dry-run --page-programs always --libcuda $FAKE --platform unified --state-file $W/gp.state \
		--floor 16M --low 32M --drop 1G >$W/gp.out 2>$W/gp.err &
	GUARD_PID=$!
	if ! wait_until 60 grep -q "page pool: its shrinkers" $W/fpr.err ||
	   ! wait_until $LONG grep -q 'guard: armed' $W/gp.err; then
		fnv_pool_end
		echo "report or guard not ready: $(grep -v '^libbpf' $W/fpr.err | tail -n 1)" \
			"$(grep -v '^libbpf' $W/gp.err | tail -n 1)"
		return 1
	fi
	fnv_run p fp timeout $LONG umtrace trace --json --libcuda $FAKE -- \
		alloc_mix -n 4 -s 8M -a alloc -F -o $W/fp.json || { fnv_pool_end; return 1; }
	g_holds=$(fnv_guard_pool "$(fnv_at pool p.1)")
	avail0=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
	echo 2 >/proc/sys/vm/drop_caches
	avail1=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
	fnv_snap p.2
	g_after=$(fnv_guard_pool "$(fnv_at pool p.2)")
	fnv_pool_end
	rc=$?
	taken=$(fnv_delta taken p.0 p.1); served=$(fnv_delta pool_out p.0 p.1)
	kept=$(fnv_delta pool_in p.0 p.1); freed=$(fnv_delta freed p.0 p.1)
	scrubbed=$(fnv_delta scrubbed p.0 p.1); shrunk=$(fnv_delta shrunk p.1 p.2)
	held=$(fnv_at pool p.1)
	up=$(usum $W/fp.out cuMemAlloc_v2 host_bytes)
	down=$(usum $W/fp.out cuMemFree_v2 host_freed_bytes)
	zero=$(jawk '/"event":"alloc","api":"cuMemAlloc_v2"/ && num("ret") == 0 && num("host_bytes") < 65536 { n++ }
		END { print n + 0 }' $W/fp.out)
	pool_of() { jawk -v f="$2" -v pg="$FNV_PG" '/"event":"driver_pool"/ { printf "%d\n", num(f) / pg }' "$1"; }
	t_kept=$(pool_of $W/fp.out kept_bytes); t_served=$(pool_of $W/fp.out served_bytes)
	t_holds=$(pool_of $W/fp.out holds_bytes)
	r_shrunk=$(pool_of $W/fpr.out shrunk_bytes); r_holds=$(pool_of $W/fpr.out holds_bytes)
	fnv_info "pool: driver took $taken new pages, served $served from the pool ($zero of 4 calls HOST+ < 64K)," \
		"kept $kept freed pages ($freed given back), scrubbed $scrubbed; umtrace HOST+ $up, HOST- $down at the frees"
	fnv_info "pool: after the job the pool holds $held pages; umtrace trace: kept ${t_kept:-none}," \
		"served ${t_served:-none}, holds ${t_holds:-none}"
	fnv_info "pool: drop_caches: the shrinker gave back $shrunk, MemAvailable $((avail1 - avail0)) KiB more;" \
		"umtrace report: shrinker gave back ${r_shrunk:-none}, pool holds ${r_holds:-none}"
	fnv_info "pool: the guard's status: the pool holds ${g_holds:-none} pages after the job," \
		"${g_after:-none} after drop_caches"
	[ "$rc" = 0 ] || { echo "report: exit $rc: $(grep -v '^libbpf' $W/fpr.err | tail -n 2)"; return 1; }
	near "$up" "$taken" || { echo "HOST+ $up pages, the driver took $taken new"; return 1; }
	[ "$down" = "$freed" ] || { echo "HOST- at the frees $down pages, the driver freed $freed"; return 1; }
	[ "$served" -gt 0 ] && [ "$kept" -gt 0 ] && [ "$shrunk" = "$held" ] ||
		{ echo "the pool did not serve, keep and shrink: served $served kept $kept shrunk $shrunk"; return 1; }
	# The pool as a holder: a call's own slab pages make it take a few
	# more, so served (and with it what is gone) may be short by the slack.
	[ "$t_kept" = "$kept" ] || { echo "trace: pool kept ${t_kept:-none} pages, the driver $kept"; return 1; }
	near "$served" "${t_served:-0}" || { echo "trace: pool served ${t_served:-none} pages, the driver $served"; return 1; }
	near "${t_holds:-0}" "$held" || { echo "trace: pool holds ${t_holds:-none} pages, the driver $held"; return 1; }
	[ "$r_shrunk" = "$shrunk" ] || { echo "report: shrinker gave back ${r_shrunk:-none} pages, the driver $shrunk"; return 1; }
	near "${r_holds:-0}" "$(fnv_at pool p.2)" ||
		{ echo "report: pool holds ${r_holds:-none} pages, the driver $(fnv_at pool p.2)"; return 1; }
	near "${g_holds:-0}" "$held" || { echo "guard: pool holds ${g_holds:-none} pages, the driver $held"; return 1; }
	near "${g_after:-0}" "$(fnv_at pool p.2)" ||
		{ echo "guard: pool holds ${g_after:-none} pages after drop_caches"; return 1; }
}

# The guard's figure for the pool, in pages, once its state file has it
# within the slack of WANT (it writes the file every second); or the last.
fnv_guard_pool() {
	got=
	end=$(($(date +%s) + 10))
	while [ "$(date +%s)" -le "$end" ]; do
		got=$(timeout 60 umtrace status --json --state-file $W/gp.state 2>/dev/null |
			jawk -v pg="$FNV_PG" '{ v = num("driver_pool"); if (v >= 0) printf "%d\n", v / pg }')
		[ -n "$got" ] && near "$got" "$1" && break
		sleep 0.2
	done
	echo "$got"
}

# The pool's watchers end: the live report prints, the guard exits (its status).
fnv_pool_end() {
	kill -INT $rpid 2>/dev/null
	wait $rpid
	rc=$?
	guard_cleanup
	GUARD_PID=
	return $rc
}

# The BH thread takes a page of its own per 2 MiB for the job (its memory
# cgroup active, no mm) and faults the second half of 2 x 8 MiB of managed
# memory in (its mm adopted): umtrace charges both to the job as they are
# taken, the thread keeps no more than the slack. Both in a live report
# (JSON: to the page) and in top (text: to its figure's precision).
FNV_CG=/sys/fs/cgroup/fnvjob
FNV_BH_JOB="echo \$\$ >$FNV_CG/cgroup.procs; exec alloc_mix -n 2 -s 8M -a managed -F"

fnv_bh_setup() {
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
	grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
		{ echo "no memory controller for the job's cgroup"; return 1; }
	mkdir -p $FNV_CG
}

# fnv_bh_want NAME: what the BH took in run NAME: FAULTED, KPAGES; the job's PID
fnv_bh_want() {
	faulted=$(fnv_delta bh_faulted "$1.0" "$1.1"); kpages=$(fnv_delta bh_kernel "$1.0" "$1.1")
	pid=$(sed -n 's/^ *"pid": \([0-9]*\),$/\1/p' "$W/$1.json")
	[ "$faulted" -gt 0 ] && [ "$kpages" -gt 0 ] && [ -n "$pid" ] ||
		{ echo "the BH did not work for a job: faulted $faulted, kernel $kpages, pid '$pid'"; return 1; }
}

fnv_bh() {
	fnv_bh_setup || return 1
	fnv_run b fb timeout $LONG umtrace report --json --libcuda $FAKE -- sh -c \
		"$FNV_BH_JOB -o $W/b.json" || return 1
	fnv_bh_want b || return 1
	grep '"event":"kernel_thread"' $W/fb.out | grep '"comm":"UVM GPU0 BH"' >$W/fb.rows
	# shellcheck disable=SC2046 # five words
	set -- $(jawk -v pg="$FNV_PG" -v pid="$pid" '
	num("for_pid") == pid {
		all += num("host_bytes") / pg; mm += num("mm_bytes") / pg
		cg += num("memcg_bytes") / pg; path = str("for_cgroup")
	}
	/"by":\[\]/ { own += num("host_bytes") / pg }
	END { printf "%d %d %d %d %s\n", all, mm, cg, own, path == "" ? "-" : path }' $W/fb.rows)
	all=$1 mm=$2 cg=$3 own=$4 path=$5
	fnv_info "bh: driver's BH faulted $faulted job pages (mm adopted), took $kpages of its own for the job (memcg active);" \
		"umtrace report: 'UVM GPU0 BH' for pid $pid $all pages ($mm by mm, $cg by memcg in $path), its own $own"
	[ -s $W/fb.rows ] || { echo "no kernel_thread row for UVM GPU0 BH: $(grep -c kernel_thread $W/fb.out) rows"; return 1; }
	near "$mm" "$faulted" || { echo "by mm: $mm pages for pid $pid, the BH faulted $faulted"; return 1; }
	near "$cg" "$kpages" || { echo "by memcg: $cg pages for pid $pid, the BH took $kpages"; return 1; }
	near "$all" $((faulted + kpages)) || { echo "pid $pid: $all pages, the BH took $((faulted + kpages))"; return 1; }
	[ "$path" = /fnvjob ] || { echo "the job's memory cgroup: $path, not /fnvjob"; return 1; }
	[ "$own" -le "$FNV_SLACK" ] || { echo "UVM GPU0 BH kept $own pages as its own"; return 1; }
}

top_snaps() { grep -c '^umtrace top ' $W/ft.out; }
top_snapped() { [ "$(top_snaps)" -gt "$1" ]; }

# The same job under top: its last snapshot's kernel-thread table.
fnv_bh_top() {
	fnv_bh_setup || return 1
	timeout $LONG umtrace top -b -i 1s --libcuda $FAKE >$W/ft.out 2>$W/ft.err &
	tp=$!
	if ! wait_until 60 grep -q probing $W/ft.err; then
		kill -INT $tp; wait $tp
		echo "top did not attach: $(tail -n 2 $W/ft.err)"
		return 1
	fi
	fnv_run t ftj sh -c "$FNV_BH_JOB -o $W/t.json"
	rc=$?
	# a snapshot taken after the job ended
	n=$(top_snaps)
	wait_until 30 top_snapped $((n + 1))
	kill -INT $tp
	wait $tp
	[ "$rc" = 0 ] || return 1
	fnv_bh_want t || return 1
	# "%-7u %-16s %9s  %-36s  %s": the comm has spaces, its columns do not move
	# shellcheck disable=SC2046 # five words
	set -- $(awk -v pg="$FNV_PG" -v pid="$pid" '
	function bytes(s,  u, v) {
		u = substr(s, length(s)); v = substr(s, 1, length(s) - 1) + 0
		prec[s] = (v < 10 ? 0.05 : 0.5) * (u == "K" ? 1024 : u == "M" ? 1048576 : u == "G" ? 1073741824 : 0)
		return v * (u == "K" ? 1024 : u == "M" ? 1048576 : u == "G" ? 1073741824 : 1)
	}
	/^PID +KERNEL THREAD/ { table = 1; job = own = err = 0; who = "-"; next }
	table && !NF { table = 0 }
	table && substr($0, 9, 16) ~ /^UVM GPU0 BH +$/ {
		t = substr($0, 26, 9); gsub(/ /, "", t)
		f = substr($0, 37); sub(/  .*$/, "", f)	# FOR, then two spaces and the role
		if (f == "-") { own = bytes(t); next }
		if (index(f, pid " ") == 1) { job = bytes(t); err = prec[t]; who = f; gsub(/ /, "~", who) }
	}
	END { printf "%d %d %d %d %s\n", job / pg, own / pg, err / pg, err, who }' $W/ft.out)
	job=$1 own=$2 err=$3 who=$5
	fnv_info "bh: under top: 'UVM GPU0 BH' for '$(echo "$who" | tr '~' ' ')' $job pages (figure +-$err), its own $own;" \
		"the BH took $((faulted + kpages))"
	[ "$who" != - ] || { echo "top: no UVM GPU0 BH row for pid $pid: $(grep -A 6 'KERNEL THREAD' $W/ft.out | tail -n 6)"; return 1; }
	case $who in
	*~by~mm+memcg*) ;;
	*) echo "top: the BH's row for pid $pid is not by mm and memcg: $who"; return 1 ;;
	esac
	case $who in
	*~in~/fnvjob~*) ;;
	*) echo "top: the BH's row for pid $pid does not name /fnvjob: $who"; return 1 ;;
	esac
	[ "$job" -ge $((faulted + kpages - err)) ] && [ "$job" -le $((faulted + kpages + err + FNV_SLACK)) ] ||
		{ echo "top: $job pages for pid $pid, the BH took $((faulted + kpages)) (figure +-$err)"; return 1; }
	[ "$own" -le $((FNV_SLACK + err)) ] || { echo "top: UVM GPU0 BH kept $own pages as its own"; return 1; }
}

# GH200's HBM: allocations on the memory-only node 1 (__GFP_THISNODE),
# counted apart: --device-nodes auto takes node 1 while the driver's
# /proc/driver/nvidia is there.
fnv_node() {
	[ -d /sys/devices/system/node/node1 ] && [ -z "$(cat /sys/devices/system/node/node1/cpulist)" ] ||
		{ echo "no memory-only node 1"; return 1; }
	echo 0 >$FNV_POOLS
	fnv_run n fn FAKECUDA_DRIVER_NODE=1 timeout $LONG umtrace trace --json --libcuda $FAKE -- \
		alloc_mix -n 2 -s 8M -a alloc -F -o $W/fn.json || return 1
	taken=$(fnv_delta taken n.0 n.1)
	dev=$(usum $W/fn.out cuMemAlloc_v2 device_node_bytes)
	host=$(usum $W/fn.out cuMemAlloc_v2 host_bytes)
	said=$(grep -m1 'NUMA node(s) are not host RAM' $W/fn.err)
	fnv_info "node: driver took $taken pages on node 1; umtrace (--device-nodes auto): device-node $dev, HOST+ $host pages;" \
		"it said: ${said:-nothing}"
	case $said in
	*"1 NUMA node(s) are not host RAM (1)"*) ;;
	*) echo "auto did not take node 1: $(grep -v '^libbpf' $W/fn.err | tail -n 2)"; return 1 ;;
	esac
	[ "$dev" = "$taken" ] || { echo "device-node $dev pages, the driver took $taken on node 1"; return 1; }
	[ "$host" -le "$FNV_SLACK" ] || { echo "HOST+ $host pages for node-1 allocations"; return 1; }
}

fnv_check() {
	: >$W/fnv.info
	check "$@"
	[ ! -s $W/fnv.info ] || sed 's/^/# /' $W/fnv.info
}

fakedriver_checks() {
	if [ ! -f "$FNV_KO" ]; then
		echo "# fakedriver: SKIP: no module for $(uname -r) (scripts/vmtest.sh could not build it)"
		return
	fi
	check fakedriver_load fnv_load
	[ -c /dev/fakenv ] || return
	# the driver's pages, in bytes: the kernel's page size
	FNV_PG=$(awk '$1 == "page_size" { print $2 }' /proc/fakenv)
	echo "# fakedriver: pages of $FNV_PG bytes, orders $(awk '/^order/ { printf "%s ", $2 }' /proc/fakenv)"
	fnv_check fakedriver_eager fnv_eager
	fnv_check fakedriver_pool fnv_pool
	fnv_check fakedriver_bh fnv_bh
	fnv_check fakedriver_bh_top fnv_bh_top
	fnv_check fakedriver_node fnv_node
}

# ---- the kernel's own view ----

DMESG_BASE=$(dmesg | wc -l)
kernel_log() {
	dmesg | tail -n +$((DMESG_BASE + 1)) | grep -E -A 3 'WARNING:|BUG:|Oops|general protection|Call trace' |
		head -n 4 | tr '\n' ' ' | grep . && return 1
	return 0
}

# ---- the run ----

echo "suite: $(uname -r) $(uname -m), $(nproc) CPUs, $(awk '/^MemTotal:/ { print $2 / 1024 " MiB" }' /proc/meminfo)"
# As on the build machine: huge pages only where asked for. Debian's kernels
# default to "always", and then a call's populate may take a 2 MiB page that
# reaches into its neighbour's range: host bytes per call are off by up to
# 7% (the pages are real, the fake's ground truth does not know them).
THP=/sys/kernel/mm/transparent_hugepage/enabled
[ ! -w $THP ] || echo madvise >$THP

# umtrace check loads every program of every command, attaching nothing.
timeout $LONG umtrace check >$W/check.out 2>$W/check.err
CHECK_RC=$?
if [ "$CHECK_RC" = 1 ] && [ "$(wc -l <$W/check.err)" = 1 ] &&
   grep -q 'kernel too old' $W/check.err; then
	refused_everywhere
fi
check verify verify_all
sed 's/^/# /' $W/check.out
if [ "$CHECK_RC" != 0 ]; then
	# the verifier's own words, for the report
	timeout $LONG umtrace check -v 2>&1 |
		sed -n '/BEGIN PROG LOAD LOG/,/END PROG LOAD LOG/p' | tail -n 40 | sed 's/^/# /'
fi

# 2 threads x 2 rounds of all 26 entry points, 8 MiB each, each freed at once.
timeout $LONG umtrace trace -v --json --libcuda $FAKE -- \
	alloc_mix -t 2 -n 2 -s 8M -a all -F -o $W/a.json >$W/a.out 2>$W/a.err
A_RC=$?
check trace_calls trace_calls
check trace_host_bytes trace_host_bytes
check trace_frees trace_frees
check trace_vmm trace_vmm
check trace_nested trace_nested
if [ "$(kver)" -ge 6006 ]; then
	check uprobes_multi uprobe_path a "one multi-uprobe link per library"
	check uprobes_perf_event perf_event_uprobes
else
	check uprobes_perf_event uprobe_path a "one perf event per entry point"
fi
[ "$(uname -m)" != x86_64 ] || check managed_faults managed_faults
check top top_once
check record_report record_report
check guard guard_check
[ -s $W/zones.txt ] && echo "# $(cat $W/zones.txt)"
check real_libcuda_probed real_trace
check real_libcuda_calls real_calls
check real_libcuda_entry real_entry
if [ -s /torch/forms ]; then
	check real_libc10_forms real_libc10
else
	echo "# no real libc10 files of this arch (scripts/fetch-torch.sh): real_libc10_forms not run"
fi
fakedriver_checks
check kernel_log kernel_log

if [ "$nfail" = 0 ]; then
	echo "vmtest-suite: PASS $npass"
else
	echo "vmtest-suite: FAIL $nfail of $((npass + nfail)) checks failed:$failed"
fi
