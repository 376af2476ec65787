#!/usr/bin/env bash
# Install umtrace's build dependencies on Debian bookworm (run as root).
# Usage: scripts/install-deps.sh [--test] [--cross] [--bench]
#   (none)   what `make`, `make demo`, `make static`, `make install` need.
#   --test   also what `make test` and `make vmtest` read the tool's output
#            with: Prometheus, node_exporter and Alertmanager, Slurm
#            (slurmctld, slurmd) and MUNGE (their services left stopped and
#            disabled), Chromium, xmllint, protoc, sshd, stress-ng, lintian,
#            qemu, Node.js and the npm package kubernetes-models (global),
#            PyTorch 1.13 (python3-torch) and, through scripts/fetch-torch.sh,
#            trixie's 2.6 in a cached root and the libc10 files of other
#            builds (about 6 minutes and 1.3 GB of cache on a fresh machine).
#   --cross  also install what a static arm64 cross-build needs.
#   --bench  also install the tools `make bench` compares umtrace with.
# Safe to rerun: apt-get skips what is installed, the arch is added once.
set -euo pipefail

TEST=0
CROSS=0
BENCH=0
usage() {
	sed -n '3,16s/^# \{0,1\}//p' "$0"
}
for arg in "$@"; do
	case $arg in
	--test) TEST=1 ;;
	--cross) CROSS=1 ;;
	--bench) BENCH=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "install-deps: unknown option $arg (usage: $0 [--test] [--cross] [--bench])" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "install-deps: must run as root" >&2; exit 1; }

# No prompts and no recommends: this runs unattended (CI, fresh VMs), where
# something else (unattended-upgrades) may briefly hold the dpkg lock.
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -qq -o DPkg::Lock::Timeout=300)
APT_INSTALL=("${APT[@]}" install -y --no-install-recommends)

# The build, `make demo`, `make fuzz` and `make SANITIZE=1` (libclang-rt),
# the man pages and `make deb` (debhelper to groff-base).
NATIVE=(make gcc g++ clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
	libzstd-dev libdw-dev liblzma-dev libbz2-dev pkg-config python3 procps
	file util-linux libinih-dev libclang-rt-14-dev libcap-dev
	debhelper dpkg-dev fakeroot man-db groff-base bash-completion)
# --test: what only the tests use.
# prometheus (promtool), prometheus-node-exporter, prometheus-alertmanager:
# the rules' and metrics' checks and the whole metrics pipeline of
# tests/integration/test_ops_metrics.py, which starts its own instances on
# loopback ports; the packages' services are kept from running here.
# chromium to fonts-dejavu-core: the flamegraphs' readers (test_export.py,
# test_flamegraph.py). stress-ng: the soak and the shared-host tests.
# openssh-server: the real sshd the guard must never stop, run by
# tests/integration/test_guard_identity.py on a loopback port of its own
# (Debian's policy-rc.d, where present, keeps the package from starting it).
# lintian, python3-yaml: test_install.py, test_deploy.py.
# qemu-system-*, busybox-static and cpio: the kernel matrix, `make vmtest`.
# python3-torch (1.13.1, with 160 packages, 144 MB) and mmdebstrap: real
# PyTorch for tests/integration/test_real_torch.py; mmdebstrap builds the
# trixie root its 2.x build runs in (scripts/fetch-torch.sh).
# Its fake NVIDIA module is built with gcc-12 (NATIVE's gcc) and, for
# arm64, gcc-aarch64-linux-gnu (--cross); scripts/vmtest.sh fetches the
# kernels' headers and the kbuild tools itself (the tools it runs need
# libelf1, which libelf-dev brings; only sign-file, never run, needs libssl3).
# munge, slurmctld, slurmd, slurm-client (slurm-wlm's parts, 22.05 on
# bookworm): the one-node Slurm of tests/integration/test_slurm.py, which
# starts its own munged, slurmctld and slurmd; their services are kept from
# running here like Prometheus's.
SLURM_PKGS=(munge slurmctld slurmd slurm-client)
PROM_PKGS=(prometheus prometheus-node-exporter prometheus-alertmanager)
TEST_PKGS=(chromium libxml2-utils protobuf-compiler python3-jsonschema fonts-dejavu-core
	stress-ng openssh-server lintian python3-yaml
	qemu-system-x86 qemu-system-arm busybox-static cpio python3-torch mmdebstrap)
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

# Services a test package would start (and enable for every boot) that this
# machine did not run before: kept from starting while apt installs them (a
# policy-rc.d, unless the machine has its own), then disabled. The tests
# start their own instances with their own configurations.
quiet_install() {
	local pkg new=() own_policy=0
	for pkg in "$@"; do
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || new+=("$pkg")
	done
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		own_policy=1
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	"${APT_INSTALL[@]}" "$@" >/dev/null
	if [ "$own_policy" = 1 ]; then
		rm -f /usr/sbin/policy-rc.d
		trap - EXIT
	fi
	# Every service a new package ships (munge's is munge.service,
	# slurm-client's none).
	for pkg in "${new[@]}"; do
		command -v systemctl >/dev/null || break
		for unit in $(dpkg -L "$pkg" 2>/dev/null |
			sed -n 's|^/\(usr/\)\{0,1\}lib/systemd/system/\([^/]*\.service\)$|\2|p'); do
			stage "disabling $unit (the tests run their own)"
			systemctl --quiet disable "$unit" 2>/dev/null || true
		done
	done
}

if [ "$TEST" = 1 ]; then
	stage "installing test packages"
	"${APT_INSTALL[@]}" "${TEST_PKGS[@]}" >/dev/null
	stage "installing Prometheus, node_exporter and Alertmanager (services off)"
	quiet_install "${PROM_PKGS[@]}"
	stage "installing Slurm and MUNGE (services off)"
	quiet_install "${SLURM_PKGS[@]}"

	# The Kubernetes manifest's schema check (test_deploy.py): the API's
	# schemas as kubernetes-models ships them, compiled, for offline
	# validation. Node.js from Debian unless the machine has one (its npm
	# comes with it).
	K8S_MODELS=kubernetes-models@4.5.1
	if ! command -v npm >/dev/null; then
		stage "installing nodejs and npm"
		"${APT_INSTALL[@]}" nodejs npm >/dev/null
	fi
	if ! npm ls -g --depth=0 "$K8S_MODELS" >/dev/null 2>&1; then
		stage "installing $K8S_MODELS (npm, global)"
		npm install -g --no-audit --no-fund --loglevel=error "$K8S_MODELS" >/dev/null
	fi

	stage "fetching Debian's PyTorch builds (scripts/fetch-torch.sh)"
	"$(dirname "$0")/fetch-torch.sh"
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
