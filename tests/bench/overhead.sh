#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# overhead.sh OUT: `make bench`'s entry point. Runs the overhead suite
# (tests/bench/suite.py): a page-fault storm, stress-ng --vm, a GPU call
# storm through the fake libcuda and a mixed run, each with no tracer, an
# empty mm_page_alloc program, umtrace guard, trace and record, bpftrace
# and perf record, alternated run by run; first, the maps walk's cost a
# line (maps_walk). Prints a table with PASS/MISS per
# target and writes OUT/bench/suite.json. Needs root; about 11 minutes on 2
# CPUs. The BENCH_* knobs are listed by `tests/bench/suite.py --help`.
set -euo pipefail

[[ $# == 1 ]] || { echo "usage: overhead.sh OUT (e.g. build/x86)" >&2; exit 2; }
# What a /proc/PID/maps walk costs a line, small texts against large (seconds).
"$1/bench/maps_walk"
exec "${PYTHON:-python3}" "$(dirname "$0")/suite.py" "$1"
