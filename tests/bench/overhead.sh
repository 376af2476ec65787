#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# overhead.sh OUT: what umtrace costs a page-fault-heavy program.
#
# Times tests/bench/storm (every page of it one mm_page_alloc event) with
# nothing attached, under an empty mm_page_alloc program (the floor any BPF
# page tracer pays), under `umtrace trace`, and under a bpftrace one-liner
# when bpftrace is there. Configurations alternate run by run so that drift
# in the machine spreads over all of them alike. The kernel's BPF run-time
# statistics give each program's mean time per invocation.
#
# Prints a table; writes OUT/bench/overhead.json. Needs root.
#
# Environment:
#   BENCH_RUNS=5      runs per configuration
#   BENCH_THREADS     storm threads; CPUs less one, 1 to 4: a CPU left over
#                     for kernel threads, the tracer and the shell keeps
#                     the storm's wall time steady (on 2 vCPUs, two storm
#                     threads let runs of one config differ by over 50%)
#   BENCH_GIB         GiB touched per storm round, all threads together;
#                     0.5 per thread
#   BENCH_ROUNDS=3    storm rounds
#   BENCH_STATS=1     0: leave kernel.bpf_stats_enabled alone and report
#                     wall times only (the statistics cost each program
#                     invocation two clock reads, which the wall times of
#                     the traced configurations would otherwise include)

set -euo pipefail

RUNS=${BENCH_RUNS:-5}
THREADS=${BENCH_THREADS:-$(nproc | awk '{ n = $1 - 1; print (n < 1 ? 1 : (n > 4 ? 4 : n)) }')}
GIB=${BENCH_GIB:-$(awk -v t="$THREADS" 'BEGIN { print t / 2 }')}
ROUNDS=${BENCH_ROUNDS:-3}
STATS=${BENCH_STATS:-1}
READY_TIMEOUT_S=30
STOP_TIMEOUT_S=60
BPFTRACE_PROG='tracepoint:kmem:mm_page_alloc { @[tid] = count(); }
BEGIN { printf("attached\n"); }
END { clear(@); }'

out=
tmp=
old_stats=
tracer_pid=
tracer_log=

declare -a configs=(none empty trace)
declare -A walls=()	# config -> wall times, seconds
declare -A prog_names=()	# config -> its programs, in order seen
declare -A prog_ns=()	# config/program -> mean ns per invocation, per run
declare -A prog_cnt=()	# config/program -> invocations per run
declare -A skipped=()	# config -> why it was left out

die() {
	echo "overhead.sh: $*" >&2
	exit 1
}

note() {
	echo "overhead.sh: $*" >&2
}

# Reads median, min and max of the numbers on stdin, one per line.
median_min_max() {
	sort -g | awk '{ v[NR] = $1 }
		END {
			if (!NR)
				exit 1
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			print m, v[1], v[NR]
		}'
}

words_to_lines() {
	tr ' ' '\n' | sed '/^$/d'
}

check_setup() {
	local f

	[[ $(id -u) == 0 ]] || die "needs root (BPF programs, kernel.bpf_stats_enabled)"
	for f in "$out/umtrace" "$out/tests/libcuda.so.1" "$out/bench/empty_tp" \
		 "$out/bench/storm"; do
		[[ -e $f ]] || die "$f is missing: run 'make bench'"
	done
	command -v jq > /dev/null || die "needs jq"
	if [[ $STATS == 1 ]]; then
		command -v bpftool > /dev/null || die "needs bpftool"
	fi
	[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive integer"
}

# --- the tracers under test ------------------------------------------------

# Starts the tracer of config $1 in the background; sets tracer_pid.
start_tracer() {
	tracer_log=$tmp/$1.log
	: > "$tracer_log"
	# exec: $! must be the tracer itself, not a subshell around it, for
	# SIGINT to reach it and for its fdinfo to list its programs.
	case $1 in
	empty)
		exec "$out/bench/empty_tp" > "$tracer_log" 2>&1 &
		;;
	trace)
		exec "$out/umtrace" trace --libcuda "$out/tests/libcuda.so.1" --json \
			> /dev/null 2> "$tracer_log" &
		;;
	bpftrace)
		exec bpftrace -e "$BPFTRACE_PROG" > "$tracer_log" 2>&1 &
		;;
	esac
	tracer_pid=$!
}

# What the tracer of config $1 says once its programs are attached.
ready_pattern() {
	case $1 in
	trace) echo '^umtrace: probing ' ;;
	*) echo '^attached$' ;;
	esac
}

# Waits for the tracer to say it is attached; fails if it dies first.
wait_ready() {
	local pattern deadline=$((SECONDS + READY_TIMEOUT_S))

	pattern=$(ready_pattern "$1")
	while ! grep -q "$pattern" "$tracer_log"; do
		if ! kill -0 "$tracer_pid" 2> /dev/null || ((SECONDS >= deadline)); then
			note "$1: the tracer did not attach; it said:"
			sed 's/^/  /' "$tracer_log" >&2
			return 1
		fi
		sleep 0.05
	done
}

# True while $1 runs; a zombie counts as gone.
alive() {
	local stat

	stat=$(cat "/proc/$1/stat" 2> /dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]]
}

# SIGINT, as a user would stop it; SIGKILL if it hangs. Reaps it.
stop_tracer() {
	local deadline=$((SECONDS + STOP_TIMEOUT_S)) rc=0

	[[ -n $tracer_pid ]] || return 0
	kill -INT "$tracer_pid" 2> /dev/null || true
	while alive "$tracer_pid"; do
		if ((SECONDS >= deadline)); then
			note "pid $tracer_pid ignored SIGINT for ${STOP_TIMEOUT_S}s; killing it"
			kill -KILL "$tracer_pid" 2> /dev/null || true
			break
		fi
		sleep 0.05
	done
	wait "$tracer_pid" 2> /dev/null || rc=$?
	tracer_pid=
	return $rc
}

# --- BPF statistics ----------------------------------------------------------

# IDs of the BPF programs process $1 holds, as a JSON array. Matching by
# owner, not by name alone, keeps other tracers on the machine out of it.
owned_prog_ids() {
	{ cat /proc/"$1"/fdinfo/* 2> /dev/null || true; } |
		awk '$1 == "prog_id:" { print $2 }' | sort -un |
		jq -s -c .
}

# jq condition picking the programs of config $1 that get measured.
prog_filter() {
	case $1 in
	empty) echo '.name == "empty_alloc"' ;;
	trace) echo '.name == "page_alloc" or .name == "page_free" or .name == "page_free_batched"' ;;
	bpftrace) echo '.type == "tracepoint"' ;;
	esac
}

# Prints "name run_time_ns run_cnt" for each measured program of config $1
# among the IDs $2; the counters are absent from bpftool's output while 0.
prog_stats() {
	bpftool -j prog show |
		jq -r --argjson ids "$2" \
			".[] | select(.id as \$i | \$ids | index(\$i)) | select($(prog_filter "$1"))
			 | \"\(.name) \(.run_time_ns // 0) \(.run_cnt // 0)\""
}

# Records per-invocation means from two prog_stats snapshots ($2, $3).
record_stats() {
	local cfg=$1 name ns cnt

	while read -r name ns cnt; do
		[[ " ${prog_names[$cfg]:-} " == *" $name "* ]] ||
			prog_names[$cfg]+=" $name"
		if ((cnt == 0)); then
			prog_ns[$cfg/$name]+=" nan"
		else
			prog_ns[$cfg/$name]+=" $(awk -v t="$ns" -v c="$cnt" 'BEGIN { printf "%.1f", t / c }')"
		fi
		prog_cnt[$cfg/$name]+=" $cnt"
	done < <(join <(sort <<< "$3") <(sort <<< "$2") |
		awk '{ print $1, $2 - $4, $3 - $5 }')
}

enable_stats() {
	[[ $STATS == 1 ]] || return 0
	old_stats=$(sysctl -n kernel.bpf_stats_enabled)
	sysctl -q -w kernel.bpf_stats_enabled=1
}

cleanup() {
	stop_tracer > /dev/null 2>&1 || true
	if [[ -n $old_stats ]]; then
		sysctl -q -w kernel.bpf_stats_enabled="$old_stats" || true
	fi
	if [[ -n $tmp ]]; then
		rm -rf "$tmp"
	fi
}

# Programs someone else left attached to hot paths slow every config alike,
# which shrinks the ratios; say so rather than guess.
warn_foreign_progs() {
	local progs

	command -v bpftool > /dev/null || return 0
	progs=$(bpftool -j prog show 2> /dev/null |
		jq -r '[.[] | select(.type == "tracing" or .type == "tracepoint" or
			.type == "raw_tracepoint") | "\(.id):\(.name)"] | join(" ")') || return 0
	[[ -z $progs ]] || note "warning: tracing programs already loaded: $progs"
}

# --- runs ----------------------------------------------------------------------

storm() {
	local t

	t=$("$out/bench/storm" -t "$THREADS" -s "$GIB" -r "$ROUNDS") ||
		die "storm failed"
	[[ $t =~ ^[0-9]+\.[0-9]+$ ]] || die "storm printed '$t', not a time"
	echo "$t"
}

# One storm under config $1, tracer started before and stopped after.
run_once() {
	local cfg=$1 ids='' before='' after='' t

	if [[ $cfg == none ]]; then
		walls[$cfg]+=" $(storm)"
		return
	fi
	start_tracer "$cfg"
	wait_ready "$cfg" || die "$cfg: cannot attach"
	if [[ $STATS == 1 ]]; then
		ids=$(owned_prog_ids "$tracer_pid")
		before=$(prog_stats "$cfg" "$ids")
		[[ -n $before ]] || die "$cfg: its mm_page_alloc program is not among programs $ids"
	fi
	t=$(storm)
	if [[ $STATS == 1 ]]; then
		after=$(prog_stats "$cfg" "$ids")
	fi
	if ! stop_tracer; then
		note "$cfg: the tracer exited with status $?; it said:"
		sed 's/^/  /' "$tracer_log" >&2
	fi
	walls[$cfg]+=" $t"
	if [[ $STATS == 1 ]]; then
		record_stats "$cfg" "$before" "$after"
	fi
}

# bpftrace is optional: a quick try says whether it can run here.
probe_bpftrace() {
	if ! command -v bpftrace > /dev/null; then
		skipped[bpftrace]="bpftrace is not installed"
		return
	fi
	# It reads tracepoint formats there; mounting it is the admin's call.
	if [[ ! -d /sys/kernel/tracing/events/kmem ]]; then
		skipped[bpftrace]="tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)"
		return
	fi
	start_tracer bpftrace
	if wait_ready bpftrace 2> /dev/null; then
		configs+=(bpftrace)
	else
		skipped[bpftrace]="bpftrace cannot attach: $(tail -n 1 "$tracer_log")"
	fi
	stop_tracer || true
}

# --- report --------------------------------------------------------------------

pages_per_run() {
	awk -v g="$GIB" -v r="$ROUNDS" -v p="$(getconf PAGESIZE)" \
		'BEGIN { printf "%d", g * 2^30 / p * r }'
}

# "median min max" of config $1's wall times.
wall_summary() {
	words_to_lines <<< "${walls[$1]}" | median_min_max
}

# Extra CPU time per page touched, in ns: wall time over `none`, times the
# threads, each of which has a CPU of its own (hence THREADS < CPUs).
cpu_ns_per_page() {
	awk -v m="$1" -v base="$2" -v t="$THREADS" -v p="$(pages_per_run)" \
		'BEGIN { printf "%.0f", (m - base) * 1e9 * t / p }'
}

print_table() {
	local cfg base med min max name n c

	read -r base _ _ < <(wall_summary none)
	printf '\nstorm -t %s -s %s -r %s (%s pages per run), %s runs per config, bpf_stats_enabled=%s\n\n' \
		"$THREADS" "$GIB" "$ROUNDS" "$(pages_per_run)" "$RUNS" "$STATS"
	printf '%-10s %9s %9s %9s %7s %14s\n' config median_s min_s max_s ratio cpu_ns/page
	for cfg in "${configs[@]}"; do
		read -r med min max < <(wall_summary "$cfg")
		printf '%-10s %9.3f %9.3f %9.3f %7.3f %14s\n' "$cfg" "$med" "$min" "$max" \
			"$(awk -v a="$med" -v b="$base" 'BEGIN { print a / b }')" \
			"$(if [[ $cfg == none ]]; then echo -; else cpu_ns_per_page "$med" "$base"; fi)"
	done
	for cfg in "${!skipped[@]}"; do
		printf '%-10s skipped: %s\n' "$cfg" "${skipped[$cfg]}"
	done
	[[ $STATS == 1 ]] || return 0
	printf '\n%-10s %-18s %10s %9s %9s %12s\n' config program ns/call_med min max calls/storm
	for cfg in "${configs[@]}"; do
		for name in ${prog_names[$cfg]:-}; do
			read -r n min max < <(words_to_lines <<< "${prog_ns[$cfg/$name]}" | median_min_max)
			read -r c _ _ < <(words_to_lines <<< "${prog_cnt[$cfg/$name]}" | median_min_max)
			printf '%-10s %-18s %10.1f %9.1f %9.1f %12.0f\n' "$cfg" "$name" "$n" "$min" "$max" "$c"
		done
	done
	read -r n _ _ < <(words_to_lines <<< "${prog_ns[empty/empty_alloc]}" | median_min_max)
	printf '\nns/call includes the clock reads of the statistics themselves: less empty_alloc (%.1f ns), it is the program body.\n' "$n"
}

# JSON array of the words in $1 (numbers; "nan" becomes null).
json_array() {
	words_to_lines <<< "$1" | sed 's/^nan$/null/' | jq -s -c .
}

config_json() {
	local cfg=$1 base=$2 med min max name n c fields progs=

	read -r med min max < <(wall_summary "$cfg")
	fields=$(printf '"wall_s":%s,"median_s":%s,"min_s":%s,"max_s":%s,"ratio":%s' \
		"$(json_array "${walls[$cfg]}")" "$med" "$min" "$max" \
		"$(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.4f", a / b }')")
	if [[ $cfg != none ]]; then
		fields+=",\"cpu_ns_per_page\":$(cpu_ns_per_page "$med" "$base")"
	fi
	for name in ${prog_names[$cfg]:-}; do
		read -r n min max < <(words_to_lines <<< "${prog_ns[$cfg/$name]}" | median_min_max)
		read -r c _ _ < <(words_to_lines <<< "${prog_cnt[$cfg/$name]}" | median_min_max)
		progs+=${progs:+,}$(printf '"%s":{"ns_per_call":%s,"median_ns":%s,"min_ns":%s,"max_ns":%s,"calls_per_storm":%s,"median_calls_per_storm":%s}' \
			"$name" "$(json_array "${prog_ns[$cfg/$name]}")" "$n" "$min" "$max" \
			"$(json_array "${prog_cnt[$cfg/$name]}")" "$c")
	done
	if [[ -n $progs ]]; then
		fields+=",\"progs\":{$progs}"
	fi
	printf '"%s":{%s}' "$cfg" "$fields"
}

write_json() {
	local file=$out/bench/overhead.json cfg base all=

	read -r base _ _ < <(wall_summary none)
	for cfg in "${configs[@]}"; do
		all+=${all:+,}$(config_json "$cfg" "$base")
	done
	for cfg in "${!skipped[@]}"; do
		all+=${all:+,}$(jq -n -c --arg k "$cfg" --arg why "${skipped[$cfg]}" \
			'{($k): {skipped: $why}}' | sed 's/^{//; s/}$//')
	done
	printf '{"storm":{"threads":%s,"gib_per_round":%s,"rounds":%s,"pages_per_run":%s},"runs":%s,"bpf_stats":%s,"cpus":%s,"kernel":"%s","configs":{%s}}\n' \
		"$THREADS" "$GIB" "$ROUNDS" "$(pages_per_run)" "$RUNS" \
		"$([[ $STATS == 1 ]] && echo true || echo false)" "$(nproc)" "$(uname -r)" "$all" |
		jq . > "$file.tmp"
	mv "$file.tmp" "$file"
	echo "wrote $file"
}

main() {
	local i cfg t

	[[ $# == 1 ]] || die "usage: overhead.sh OUT (e.g. build/x86)"
	out=$1
	check_setup
	tmp=$(mktemp -d /tmp/umtrace-bench.XXXXXX)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	warn_foreign_progs
	enable_stats
	probe_bpftrace
	for cfg in "${!skipped[@]}"; do
		note "$cfg skipped: ${skipped[$cfg]}"
	done
	# The first faults of a fresh VM also make the host back its memory.
	t=$(storm)
	note "warm-up run: $t s"
	for ((i = 1; i <= RUNS; i++)); do
		for cfg in "${configs[@]}"; do
			run_once "$cfg"
			note "run $i/$RUNS $cfg: ${walls[$cfg]##* } s"
		done
	done
	print_table
	write_json
}

main "$@"
