# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Deploying the guard (README, Installing): the Prometheus alert rules
(promtool check and unit tests), the Kubernetes manifest (the API's
schemas, strictly; the systemd unit's limits and capabilities), the
container recipe (its files, the static binary alone in a root), the
DaemonSet's container run as a kubelet would run it here (its mounts,
capabilities and config, from the image's files), and the Slurm hook."""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time

import harness

K8S = ("scripts", "k8s", "umtrace-guard.yaml")
CONTAINERFILE = ("scripts", "container", "Containerfile")
RULES_DIR = ("scripts", "prometheus")
KUBERNETES_MODELS = "4.5.1"	# scripts/install-deps.sh

# linux/capability.h, for the names the manifest uses.
CAPS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "KILL": 5, "SYS_PTRACE": 19,
        "SYS_NICE": 23, "IPC_LOCK": 14, "SYS_ADMIN": 21, "PERFMON": 38, "BPF": 39}


def path_of(env, parts):
    return os.path.join(env.root, *parts)


def load_k8s(env):
    try:
        import yaml
    except ImportError:
        raise harness.Skip("no PyYAML for this python3 (Debian: python3-yaml)")
    with open(path_of(env, K8S)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {d["kind"]: d for d in docs}
    return docs, by_kind


def container(by_kind):
    spec = by_kind["DaemonSet"]["spec"]["template"]["spec"]
    assert len(spec["containers"]) == 1, "one container: the guard"
    return spec, spec["containers"][0]


def unit_text(env):
    with open(path_of(env, ("scripts", "umtrace-guard.service"))) as f:
        return f.read()


def containerfile(env, arch="amd64"):
    """(COPY sources -> destinations, ENTRYPOINT, CMD, FROM) for one TARGETARCH."""
    with open(path_of(env, CONTAINERFILE)) as f:
        lines = [l.strip() for l in f if l.strip() and not l.lstrip().startswith("#")]
    copies, entry, cmd, base = [], None, None, None
    for line in lines:
        word, _, rest = line.partition(" ")
        rest = rest.replace("${TARGETARCH}", arch)
        if word == "FROM":
            base = rest
        elif word == "COPY":
            src, dst = rest.split()
            copies.append((src, dst))
        elif word == "ENTRYPOINT":
            entry = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
    return copies, entry, cmd, base


def guard_config_loads(env, path):
    tool = os.path.join(env.out, "tests", "unit", "test_guard_config")
    p = subprocess.run([tool, "--load", path], capture_output=True, text=True, timeout=30)
    return p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr


def test_prometheus_rules(env):
    """promtool checks the rules and runs their unit tests; the tests have
    teeth (a rule changed fails them); every umtrace_guard_* name and label
    the rules use is one the guard writes."""
    if not shutil.which("promtool"):
        raise harness.Skip("promtool not installed (Debian package prometheus)")
    d = path_of(env, RULES_DIR)
    p = subprocess.run(["promtool", "check", "rules", "umtrace.rules.yml"], cwd=d,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr
    p = subprocess.run(["promtool", "test", "rules", "umtrace.rules.test.yml"], cwd=d,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr

    with open(os.path.join(d, "umtrace.rules.yml")) as f:
        rules = f.read()
    # Teeth: the headroom threshold moved, the growth rule without its guard
    # against a job loading its weights.
    for old, new in (("umtrace_guard_headroom_bytes < 2 * 1024^3",
                      "umtrace_guard_headroom_bytes < 1 * 1024^3"),
                     ("\n          and umtrace_guard_process_host_bytes offset 30m", ""),
                     ("<= 1.05 * max_over_time", "<= 2 * max_over_time")):
        assert old in rules, old
        tmp = env.tmpfile("rules")
        os.makedirs(tmp, exist_ok=True)
        with open(os.path.join(tmp, "umtrace.rules.yml"), "w") as f:
            f.write(rules.replace(old, new))
        shutil.copy(os.path.join(d, "umtrace.rules.test.yml"), tmp)
        p = subprocess.run(["promtool", "test", "rules", "umtrace.rules.test.yml"], cwd=tmp,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode != 0, f"the rule tests pass with {new!r} for {old!r}"

    metrics = env.tmpfile("rules-guard.prom")
    subprocess.run([os.path.join(env.out, "tests", "unit", "test_metrics"), "--write", metrics],
                   check=True, capture_output=True, timeout=30)
    with open(metrics) as f:
        written = f.read()
    names = set(re.findall(r"^# TYPE (\S+) ", written, re.M))
    used = set(re.findall(r"\bumtrace_guard_\w+", rules))
    assert used <= names, f"not written by the guard: {sorted(used - names)}"
    for label in ("reason", "pid", "comm"):
        assert f'{label}="' in written, label
    # umtrace_torch_*: checked against the source once it exports them.
    src = subprocess.run(["grep", "-rhoE", r"umtrace_torch_\w+|\"torch_\w+_bytes\"",
                          os.path.join(env.root, "user")], capture_output=True, text=True).stdout
    if "umtrace_torch_" in src:
        torch = set(re.findall(r"\bumtrace_torch_\w+", rules))
        assert torch <= set(src.split()), f"not exported: {sorted(torch - set(src.split()))}"


def test_k8s_manifest_schema(env):
    """Every object in the manifest is valid against the Kubernetes API's
    schemas (kubernetes-models' validators, offline), with no field the
    schema does not define; a misspelt field and a bad quantity are caught."""
    if not shutil.which("node") or not shutil.which("npm"):
        raise harness.Skip("no node/npm (scripts/install-deps.sh --test installs them)")
    docs, _ = load_k8s(env)
    root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True,
                          timeout=60).stdout.strip()
    if not os.path.isdir(os.path.join(root, "kubernetes-models")):
        raise harness.Skip(f"npm package kubernetes-models not in {root} "
                           "(scripts/install-deps.sh --test installs it)")
    script = os.path.join(env.root, "tests", "integration", "k8s_validate.js")

    def validate(objs):
        p = subprocess.run(["node", script], input=json.dumps(objs), capture_output=True,
                           text=True, timeout=120, env=dict(os.environ, NODE_PATH=root))
        return p.returncode, [json.loads(l) for l in p.stdout.splitlines()], p.stderr

    rc, results, err = validate(docs)
    assert rc == 0, json.dumps(results, indent=1) + err
    assert sorted(r["kind"] for r in results) == ["apps/v1/DaemonSet", "v1/ConfigMap",
                                                  "v1/Namespace"], results
    assert all(r["validator"] == f"kubernetes-models {KUBERNETES_MODELS}" for r in results)

    bad = json.loads(json.dumps(docs))
    ds = next(d for d in bad if d["kind"] == "DaemonSet")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    c["securityContext"]["capabilites"] = c["securityContext"].pop("capabilities")
    c["resources"]["limits"]["memory"] = "64 MB"
    ds["spec"]["template"]["spec"]["hostPID"] = "true"
    rc, results, _ = validate(bad)
    r = next(r for r in results if r["kind"] == "apps/v1/DaemonSet")
    assert rc == 1 and r["unknown"] == ["/spec/template/spec/containers/0/securityContext/"
                                        "capabilites"], r
    assert any("limits/memory" in e for e in r["errors"]), r
    assert any("hostPID" in e for e in r["errors"]), r


def test_k8s_manifest_matches_unit(env):
    """The DaemonSet keeps what the systemd unit keeps: the same capability
    set and no more (not privileged, no privilege escalation), the same
    memory limit in Guaranteed QoS, a read-only root, the host's PID
    namespace, read-only host paths but for the guard's own; it runs on
    GPU nodes, the image's binary, with a config the guard loads."""
    _, by_kind = load_k8s(env)
    spec, c = container(by_kind)
    unit = unit_text(env)
    caps = re.search(r"^CapabilityBoundingSet=(.*)$", unit, re.M).group(1).split()
    sc = c["securityContext"]
    assert sorted(sc["capabilities"]["add"]) == sorted(x[len("CAP_"):] for x in caps), sc
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc.get("privileged") is False and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert spec["hostPID"] is True and spec.get("hostNetwork") is not True
    assert spec["nodeSelector"], "no node selector: GPU nodes only"
    assert spec["automountServiceAccountToken"] is False

    mem = re.search(r"^MemoryMax=(\d+)M$", unit, re.M).group(1)
    res = c["resources"]
    assert res["limits"]["memory"] == f"{mem}Mi", res
    assert res["requests"] == res["limits"], "requests = limits: Guaranteed QoS"

    volumes = {v["name"]: v for v in spec["volumes"]}
    # The guard's own, as the unit's RuntimeDirectory, StateDirectory and
    # ReadWritePaths, and bpffs for its pins.
    writable = {"/sys/fs/bpf", "/run/umtrace", "/var/lib/umtrace",
                "/var/lib/prometheus/node-exporter"}
    for d in ("RuntimeDirectory=umtrace", "StateDirectory=umtrace",
              "ReadWritePaths=-/var/lib/prometheus/node-exporter"):
        assert re.search(rf"^{re.escape(d)}$", unit, re.M), d
    mounts = {}
    for m in c["volumeMounts"]:
        v = volumes[m["name"]]
        if "hostPath" in v:
            assert v["hostPath"]["path"] == m["mountPath"], m
            mounts[m["mountPath"]] = bool(m.get("readOnly"))
            assert m.get("readOnly") or m["mountPath"] in writable, \
                f"{m['mountPath']} is mounted writable"
    for p in ("/sys/fs/bpf", "/sys/kernel/btf", "/sys/fs/cgroup", "/usr/lib", "/run/umtrace"):
        assert p in mounts, f"{p} not mounted"
    assert "/proc" not in mounts, "hostPID gives the host's /proc"

    cm = by_kind["ConfigMap"]["data"]["guard.conf"]
    conf = env.tmpfile("k8s-guard.conf")
    with open(conf, "w") as f:
        f.write(cm)
    os.chmod(conf, 0o444)
    ok, msg = guard_config_loads(env, conf)
    assert ok, f"the ConfigMap's guard.conf: {msg}"
    for key in ("metrics_file", "postmortem_dir"):
        value = re.search(rf"^{key} = (\S+)$", cm, re.M).group(1)
        assert any(value == w or value.startswith(w + "/") for w in writable), (key, value)
    assert "on_stop" not in re.sub(r"#.*", "", cm), "the image has no shell for on_stop"

    copies, entry, _, _ = containerfile(env)
    assert c["command"][0] == entry[0] and entry[0] in [d for _, d in copies], (c, entry)
    assert c["command"][1:] == ["guard", "--config", "/etc/umtrace/guard.conf"], c["command"]
    version = subprocess.run([env.umtrace, "--version"], capture_output=True,
                             text=True).stdout.split()[1]
    assert c["image"].endswith(f":{version}"), (c["image"], version)


def make(env, *args, timeout=1500):
    p = subprocess.run(["make", "-C", env.root, "--no-print-directory", *args],
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-1500:] + p.stderr[-2500:]


def image_context(env):
    """`make image-context`; Skip where it cannot be made here."""
    if env.out.endswith("-san"):
        raise harness.Skip("sanitizer build: the image carries the static build")
    if not shutil.which("aarch64-linux-gnu-gcc"):
        raise harness.Skip("no arm64 cross compiler: run scripts/install-deps.sh --cross")
    make(env, "image-context")


def image_root(env, root):
    """The image's file tree (FROM scratch plus its COPYs) under root."""
    copies, _, _, _ = containerfile(env)
    for src, dst in copies:
        target = os.path.join(root, dst.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(env.root, src), target)


def test_container_recipe(env):
    """The Containerfile builds FROM scratch with files that exist for both
    architectures (`make image-context`), each a static binary of its
    architecture; the amd64 one runs alone in a root that holds nothing
    else: no loader, no libraries, no shell."""
    image_context(env)
    for arch, magic in (("amd64", "x86-64"), ("arm64", "ARM aarch64")):
        copies, entry, cmd, base = containerfile(env, arch)
        assert base == "scratch", base
        for src, _ in copies:
            assert os.path.isfile(os.path.join(env.root, src)), f"{arch}: {src} missing"
        binary = next(s for s, d in copies if d == entry[0])
        info = subprocess.run(["file", "-b", os.path.join(env.root, binary)],
                              capture_output=True, text=True).stdout
        assert magic in info and "statically linked" in info, info
        assert cmd == ["guard", "--config", "/etc/umtrace/guard.conf"], cmd
        assert ("scripts/guard.conf.example", "/etc/umtrace/guard.conf") in copies
    root = env.tmpfile("image-root")
    image_root(env, root)
    p = subprocess.run(["chroot", root, entry[0], "--version"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("umtrace "), p
    p = subprocess.run(["chroot", root, entry[0], "help", "guard"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and "--config FILE" in p.stdout, p


# Run in the pod's mount namespace, after its mounts: chroot into the
# image, keep only the container's capabilities, no_new_privs, exec.
POD_EXEC = r"""
import ctypes, os, sys
root, keep, argv = sys.argv[1], {int(c) for c in sys.argv[2].split(",")}, sys.argv[3:]
libc = ctypes.CDLL(None, use_errno=True)
with open("/proc/sys/kernel/cap_last_cap") as f:
    last = int(f.read())
class Hdr(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]
os.chroot(root)
os.chdir("/")
for c in range(last + 1):
    if c not in keep and libc.prctl(24, c, 0, 0, 0):	# PR_CAPBSET_DROP
        sys.exit(f"PR_CAPBSET_DROP {c}: errno {ctypes.get_errno()}")
hdr, data = Hdr(0x20080522, 0), (Data * 2)()
libc.capget(ctypes.byref(hdr), data)
data[0].inheritable = data[1].inheritable = 0
if libc.capset(ctypes.byref(hdr), data) or libc.prctl(47, 4, 0, 0, 0) or \
        libc.prctl(38, 1, 0, 0, 0):	# ambient clear all, no_new_privs
    sys.exit(f"dropping capabilities: errno {ctypes.get_errno()}")
os.execve(argv[0], argv, {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                          "HOSTNAME": "umtrace-guard-test"})
"""


def test_daemonset_runs_guard(env):
    """The DaemonSet's container as a kubelet would start it, here: the
    image's files as a read-only root; a fresh /proc (the host's PID
    namespace) and a read-only /sys; its host paths mounted where it says,
    read-only where it says (the guard's own directories in temporary ones);
    its ConfigMap at /etc/umtrace; only its capabilities, no_new_privs. Its
    command (plus --dry-run) arms the guard, writes the metrics for
    node_exporter and the state `umtrace status` reads, and exits 0 on
    SIGTERM with the pins gone."""
    if not shutil.which("unshare"):
        raise harness.Skip("no unshare (util-linux)")
    _, by_kind = load_k8s(env)
    image_context(env)
    spec, c = container(by_kind)
    work = env.tmpfile("pod")
    os.makedirs(work)
    root = os.path.join(work, "root")
    image_root(env, root)
    volumes = {v["name"]: v for v in spec["volumes"]}
    own = {}
    script = ["set -e", f"R={root}",
              # The runtime's part: a read-only root, /proc, /sys, /dev.
              "mount --bind $R $R", "mkdir -p $R/proc $R/sys $R/dev",
              "mount -t proc proc $R/proc", "mount -t sysfs -o ro sysfs $R/sys",
              "mount -t tmpfs -o mode=755 tmpfs $R/dev",
              "touch $R/dev/null && mount --bind /dev/null $R/dev/null"]
    mounts = []
    for m in c["volumeMounts"]:
        v = volumes[m["name"]]
        target = m["mountPath"]
        if "configMap" in v:
            src = os.path.join(work, m["name"])
            os.makedirs(src)
            for key, text in by_kind["ConfigMap"]["data"].items():
                with open(os.path.join(src, key), "w") as f:
                    f.write(text)
                os.chmod(os.path.join(src, key), v["configMap"].get("defaultMode", 0o644))
        elif v["hostPath"].get("type") == "DirectoryOrCreate":
            src = own[target] = os.path.join(work, m["name"])
            os.makedirs(src)
        else:
            src = v["hostPath"]["path"]
            assert os.path.isdir(src), f"hostPath {src} is not on this host: the pod would " \
                "not start"
        mounts.append((src, target, bool(m.get("readOnly"))))
    for src, target, ro in mounts:
        if not target.startswith("/sys/"):
            script.append(f"mkdir -p $R{target}")
        script.append(f"mount --rbind {src} $R{target}")
        if ro:
            script.append(f"mount -o remount,bind,ro $R{target}")
    script.append("mount -o remount,bind,ro $R")
    keep = ",".join(str(CAPS[n]) for n in c["securityContext"]["capabilities"]["add"])
    argv = [*c["command"], *c.get("args", []), "--dry-run"]
    script.append("exec python3 -c \"$POD_EXEC\" $R " + keep + " " + " ".join(argv))
    penv = dict(os.environ, POD_EXEC=POD_EXEC)
    p = env.popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   "\n".join(script)], env=penv)
    pins = "/sys/fs/bpf/umtrace-guard"
    try:
        armed, early = harness.wait_line(p.stderr, "guard: armed", 60, "'guard: armed'")
        metrics = os.path.join(own["/var/lib/prometheus/node-exporter"], "umtrace_guard.prom")
        deadline = time.monotonic() + 15
        text = ""
        while time.monotonic() < deadline and "umtrace_guard_up 1" not in text:
            time.sleep(0.2)
            text = open(metrics).read() if os.path.exists(metrics) else ""
        assert "umtrace_guard_up 1" in text, f"no metrics in {metrics}: {early[-800:]}"
        state = os.path.join(own["/run/umtrace"], "guard.state")
        st = subprocess.run([env.umtrace, "status", "--state-file", state], capture_output=True,
                            text=True, timeout=30)
        assert st.returncode == 0, st.stdout + st.stderr
        assert os.path.isdir(pins), "the guard did not pin its kernel side in /sys/fs/bpf"
        with open(f"/proc/{p.pid}/status") as f:
            status = f.read()
        capeff = int(re.search(r"^CapEff:\s+(\w+)", status, re.M).group(1), 16)
        assert capeff & ~sum(1 << int(x) for x in keep.split(",")) == 0, hex(capeff)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 0, early[-600:] + err[-1500:]
        with open(metrics) as f:
            assert "umtrace_guard_up 0" in f.read()
        assert not os.path.exists(pins), "SIGTERM left the pins"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)
            shutil.rmtree(pins, ignore_errors=True)


test_daemonset_runs_guard.TIMEOUT_S = 1500
test_container_recipe.TIMEOUT_S = 1500


def run_hook(env, fake_bin, **vars):
    hook = os.path.join(env.root, "scripts", "slurm", "slurm-suspend")
    e = {"PATH": f"{fake_bin}:/usr/bin:/bin", **{f"UMTRACE_{k}": v for k, v in vars.items()}}
    log = os.path.join(fake_bin, "log")
    if os.path.exists(log):
        os.unlink(log)
    # As the guard runs it: sh -c CMD.
    p = subprocess.run(["/bin/sh", "-c", hook], capture_output=True, text=True, env=e,
                       timeout=30)
    calls = open(log).read().splitlines() if os.path.exists(log) else []
    return p.returncode, calls, p.stderr


def test_slurm_hook(env):
    """scripts/slurm/slurm-suspend, under a fake scontrol: the job from the
    cgroup v2 path, else from scontrol pidinfo, is suspended and commented;
    a dry run, or a process in no job, touches nothing; a failed suspend
    is exit 1."""
    fake = env.tmpfile("fake-slurm")
    os.makedirs(fake)
    with open(os.path.join(fake, "scontrol"), "w") as f:
        f.write('#!/bin/sh\necho "$*" >> "$(dirname "$0")/log"\n'
                'case "$1" in\n'
                'pidinfo) [ "$2" = 777 ] && echo "Slurm JobId=77 ends at Thu Jan 01" ;;\n'
                'suspend) [ "$2" = 13 ] && exit 1 ;;\n'
                'esac\nexit 0\n')
    os.chmod(os.path.join(fake, "scontrol"), 0o755)
    base = dict(COMM="python3", REASON="admission", ACTION="stop", AVAILABLE="1073741824",
                HOST_BYTES="8589934592", TOP_SITE="cuMemAlloc_v2", POSTMORTEM="")

    rc, calls, err = run_hook(env, fake, PID="4242", **base,
                              CGROUP="/system.slice/slurmstepd.scope/job_42/step_0/user/task_0")
    assert rc == 0 and calls[0] == "suspend 42", (rc, calls, err)
    assert calls[1].startswith("update JobId=42 AdminComment=umtrace guard stopped pid 4242 "
                               "(python3, reason admission"), calls
    assert len(calls) == 2

    rc, calls, _ = run_hook(env, fake, PID="777", **base, CGROUP="/user.slice/other")
    assert rc == 0 and calls[:2] == ["pidinfo 777", "suspend 77"], calls

    rc, calls, err = run_hook(env, fake, PID="888", **base, CGROUP="/user.slice/other")
    assert rc == 0 and calls == ["pidinfo 888"] and "in no Slurm job" in err, (calls, err)

    dry = dict(base, ACTION="dry-run")
    rc, calls, _ = run_hook(env, fake, PID="4242", **dry,
                            CGROUP="/system.slice/slurmstepd.scope/job_42/step_0")
    assert rc == 0 and calls == [], calls

    rc, calls, err = run_hook(env, fake, PID="4242", **base,
                              CGROUP="/system.slice/slurmstepd.scope/job_13")
    assert rc == 1 and calls == ["suspend 13"] and "failed" in err, (rc, calls, err)
    assert os.stat(os.path.join(env.root, "scripts", "slurm", "slurm-suspend")).st_mode & \
        stat.S_IXUSR
