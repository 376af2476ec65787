# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A real one-node Slurm: a batch job allocating through the fake libcuda is
stopped by `umtrace guard` at its floor, and scripts/slurm/slurm-suspend,
its --on-stop hook, suspends the job in the scheduler (squeue: S) and
says why in its AdminComment. Slurm then freezes the job's cgroup;
`scontrol resume` thaws it, but the process the guard stopped stays
stopped (state T: seen every time here, Slurm 22.05.8 on Linux 6.18) until
`umtrace resume`, the AdminComment's second command, which continues it
to its end.

The daemons are Debian's (slurm-wlm 22.05: slurmctld, slurmd, the client
commands; munge: `install-deps.sh --test`), started here as root with a
configuration of this test's own (tests/integration/slurm/: one node named
as this host, slurmctld and slurmd on 127.0.0.1 and ports free at run time,
their state, spool, logs and MUNGE's key and socket in a temporary
directory) and stopped at the end whatever happens, the job cancelled and
its processes killed first (slurmstepd outlives slurmd).

The job's processes are in cgroups Slurm makes: ProctrackType=
proctrack/cgroup, TaskPlugin=task/cgroup (ConstrainCores). Which version
depends on the host:

- cgroup v2 alone at /sys/fs/cgroup: CgroupPlugin=cgroup/v2 (IgnoreSystemd:
  this slurmd is no systemd service), the job under
  system.slice/slurmstepd.scope/job_N/, and the guard scoped by that cgroup
  as README's recipe has it; the hook reads the job from UMTRACE_CGROUP.
- a hybrid host (cgroup v1 controllers, v2 at /sys/fs/cgroup/unified, as
  the VMs these tests were written on): 22.05's cgroup/v2 refuses it
  ("Hybrid mode is not supported"), so CgroupPlugin=cgroup/v1: the job's
  tasks are in Slurm's v1 freezer and cpuset cgroups
  (slurm_HOST/uid_0/job_N/step_batch), which the guard cannot scope by (its
  `cgroup:` is cgroup v2's, where the job is in the root). The guard is
  scoped by the job's name (`comm:^alloc_mix$`) instead, and the hook finds
  the job from the pid (`scontrol pidinfo`), the path it takes on such
  nodes.

Either way the guard protects slurmd and slurmstepd (`--protect
slurmd,slurmstepd`, which it accepts only for root's files of those names).

Memory: the floor is 3 GiB below what is available, a 2.5 GiB ballast
leaves 0.5 GiB above it, and the job takes 24 x 64 MiB: stopped about
0.5 GiB in. The ballast ends before the resume, so the job's whole 1.5 GiB
leaves some 1.5 GiB above the floor: it is not stopped again, and a second
stop fails the test."""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

from harness import Skip, interrupt
from test_guard import GIB, MIB, Guard, ballast, state_of, usable, wait_stopped, wait_told

HERE = os.path.dirname(os.path.abspath(__file__))
# The binaries, by the Debian package that has them.
BINARIES = {"munged": "munge", "munge": "munge", "slurmctld": "slurmctld",
            "slurmd": "slurmd", "sbatch": "slurm-client", "squeue": "slurm-client",
            "scontrol": "slurm-client", "scancel": "slurm-client", "sinfo": "slurm-client"}
N, SIZE = 24, 64 * MIB


def free_port():
    """A loopback port nobody listens on now (the daemon binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cgroup_v2_only():
    """Whether /sys/fs/cgroup is cgroup v2 and no v1 hierarchy is in use
    (22.05's cgroup/v2 needs both)."""
    with open("/proc/self/mountinfo") as f:
        types = [l.split(" - ", 1)[1].split()[0] for l in f if " - " in l and
                 l.split()[4].startswith("/sys/fs/cgroup")]
    with open("/proc/self/mountinfo") as f:
        root_v2 = any(l.split()[4] == "/sys/fs/cgroup" and
                      l.split(" - ", 1)[1].split()[0] == "cgroup2" for l in f)
    return root_v2 and "cgroup" not in types


class Slurm:
    """munged, slurmctld and slurmd of this test's own."""

    def __init__(self, env, top, v2):
        self.env, self.top, self.v2, self.procs = env, top, v2, []
        self.host = socket.gethostname().split(".")[0]
        self.conf = os.path.join(top, "slurm.conf")
        self.sock = os.path.join(top, "run", "munge.socket")
        self.jobs = []
        # Slurm's own cgroups that were not there before: removed at the end.
        self.cgroups_before = set(self.slurm_cgroups())
        values = {"@TOP@": top, "@HOST@": self.host, "@CTLD_PORT@": str(free_port()),
                  "@SLURMD_PORT@": str(free_port()), "@CPUS@": str(os.cpu_count()),
                  "@CGROUP_PLUGIN@": "cgroup/v2" if v2 else "cgroup/v1"}
        for name in ("slurm.conf", "cgroup.conf"):
            with open(os.path.join(HERE, "slurm", name)) as f:
                text = f.read()
            for k, v in values.items():
                text = text.replace(k, v)
            assert "@" not in re.sub(r"#.*", "", text), text
            with open(os.path.join(top, name), "w") as f:
                f.write(text)
        # munged wants its key and dirs private, the socket's dir searchable.
        for d, mode in (("munge", 0o700), ("run", 0o755), ("state", 0o700),
                        ("spool", 0o755), ("log", 0o755)):
            os.mkdir(os.path.join(top, d), mode)
        os.chmod(top, 0o755)
        with open(os.path.join(top, "munge", "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(top, "munge", "munge.key"), 0o400)
        self.environ = {**os.environ, "SLURM_CONF": self.conf}

    def slurm_cgroups(self):
        return [p for p in glob.glob(f"/sys/fs/cgroup/*/slurm_{self.host}") +
                glob.glob(f"/sys/fs/cgroup/*/slurm") +
                glob.glob("/sys/fs/cgroup/system.slice/slurmstepd.scope")
                if os.path.isdir(p)]

    def run(self, *argv, timeout=30):
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=self.environ, stdin=subprocess.DEVNULL)

    def start(self, name, argv):
        log = open(os.path.join(self.top, "log", name + ".out"), "w")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT, env=self.environ)
        log.close()
        self.procs.append((name, p))
        return p

    def log(self, name):
        text = ""
        for path in (os.path.join(self.top, "log", name + ".out"),
                     os.path.join(self.top, "log", name + ".log")):
            if os.path.exists(path):
                with open(path) as f:
                    text += f.read()[-1200:]
        return text

    def wait(self, what, ready, procs, timeout=60):
        deadline = time.monotonic() + timeout
        while not ready():
            for name, p in procs:
                assert p.poll() is None, f"{name} exited ({p.returncode}): {self.log(name)}"
            assert time.monotonic() < deadline, \
                f"{what} not in {timeout}s: " + " | ".join(self.log(n) for n, _ in procs)
            time.sleep(0.2)

    def up(self):
        """munged, then slurmctld, then slurmd, each waited for; the node
        idle. stop() ends what was started even when one of them failed."""
        top = self.top
        munged = self.start("munged", [
            "munged", "-F", f"--key-file={top}/munge/munge.key", f"--socket={self.sock}",
            f"--log-file={top}/log/munged.log", f"--pid-file={top}/munge/munged.pid",
            f"--seed-file={top}/munge/munged.seed"])
        self.wait("munged answering", lambda: os.path.exists(self.sock) and
                  self.run("munge", "-n", "-S", self.sock).returncode == 0,
                  [("munged", munged)], 30)
        ctld = self.start("slurmctld", ["slurmctld", "-D", "-c"])
        self.wait("slurmctld answering",
                  lambda: self.run("scontrol", "ping").stdout.find("is UP") >= 0,
                  [("slurmctld", ctld)], 60)
        slurmd = self.start("slurmd", ["slurmd", "-D"])
        self.wait(f"node {self.host} idle",
                  lambda: self.run("sinfo", "-h", "-N", "-n", self.host,
                                   "-o", "%T").stdout.strip() == "idle",
                  [("slurmctld", ctld), ("slurmd", slurmd)], 60)

    def sbatch(self, argv, env):
        p = subprocess.run(["sbatch", "--parsable", "-J", "umtrace-test",
                            "-o", os.path.join(self.top, "job-%j.out"), "--wrap",
                            " ".join(argv)], capture_output=True, text=True, timeout=30,
                           env={**self.environ, **env}, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr
        job = p.stdout.strip().split(";")[0]
        assert job.isdigit(), p.stdout
        self.jobs.append(job)
        return job

    def job(self, job):
        """scontrol show job's KEY=VALUE fields."""
        p = self.run("scontrol", "show", "job", "-o", job)
        assert p.returncode == 0, p.stderr
        out = {}
        for m in re.finditer(r"(\w+)=(.*?)(?= \w+=|$)", p.stdout.strip()):
            out[m.group(1)] = m.group(2)
        return out

    def stepds(self):
        """The slurmstepd processes of this test's Slurm (by its SLURM_CONF)."""
        out = []
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(d + "/comm") as f:
                    if f.read().strip() != "slurmstepd":
                        continue
                with open(d + "/environ", "rb") as f:
                    if b"SLURM_CONF=" + self.conf.encode() + b"\0" in f.read():
                        out.append(int(os.path.basename(d)))
            except OSError:
                pass
        return out

    def stop(self, pids=()):
        """The jobs cancelled and their processes killed (a stopped one
        too), then slurmd, slurmctld and munged; Slurm's cgroups that this
        run made removed."""
        for job in self.jobs:
            try:
                self.run("scancel", "-f", "-s", "KILL", job, timeout=15)
            except (subprocess.TimeoutExpired, OSError):
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # A job left suspended is frozen, and a frozen process dies only
        # once thawed: thaw what this run's Slurm froze.
        for top in set(self.slurm_cgroups()) - self.cgroups_before:
            for d, _, files in os.walk(top):
                for name, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
                    if name in files:
                        try:
                            with open(os.path.join(d, name), "w") as f:
                                f.write(value)
                        except OSError:
                            pass
        deadline = time.monotonic() + 20
        while self.jobs and self.stepds() and time.monotonic() < deadline:
            time.sleep(0.2)
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)
        for pid in self.stepds():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for top in set(self.slurm_cgroups()) - self.cgroups_before:
            for d, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
                try:
                    os.rmdir(d)
                except OSError:
                    pass


def comm_of(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def frozen(pid):
    """Whether pid's cgroup is frozen (Slurm's suspend): the v1 freezer's
    state, or cgroup v2's cgroup.events; None once pid is gone."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = [l.rstrip("\n").split(":", 2) for l in f]
        for _, ctl, path in lines:
            if ctl == "freezer":
                with open(f"/sys/fs/cgroup/freezer{path}/freezer.state") as f:
                    return f.read().strip() != "THAWED"
        path = [p for _, ctl, p in lines if ctl == ""][0]
        with open(f"/sys/fs/cgroup{path}/cgroup.events") as f:
            return "frozen 1" in f.read().splitlines()
    except (OSError, IndexError):
        return None


def job_pid(slurm, job, timeout=30):
    """alloc_mix's pid in the job, once it runs."""
    deadline = time.monotonic() + timeout
    while True:
        p = slurm.run("scontrol", "listpids", job)
        for line in p.stdout.splitlines()[1:]:
            pid = line.split()[0]
            if pid.isdigit() and comm_of(pid) == "alloc_mix":
                return int(pid)
        assert time.monotonic() < deadline, \
            f"no alloc_mix in job {job} in {timeout}s: {p.stdout}{p.stderr} " \
            f"{slurm.job(job)} {slurm.log('slurmd')}"
        time.sleep(0.1)


def wait_job(slurm, job, cond, what, timeout):
    deadline = time.monotonic() + timeout
    while True:
        info = slurm.job(job)
        if cond(info):
            return info
        assert time.monotonic() < deadline, f"job {job}: {what} not in {timeout}s: {info}"
        time.sleep(0.2)


def test_slurm_job_suspended_and_resumed(env):
    """sbatch'ed alloc_mix (fake libcuda) in a real one-node Slurm: stopped
    at the guard's floor, suspended by scripts/slurm/slurm-suspend (squeue
    S, AdminComment naming the pid and the reason), its cgroup frozen;
    after `scontrol resume` still stopped, and continued by `umtrace
    resume` to its end with every allocation made and no second stop."""
    missing = [f"{b} ({pkg})" for b, pkg in BINARIES.items() if not shutil.which(b)]
    if missing:
        raise Skip(f"not installed: {', '.join(missing)}; scripts/install-deps.sh --test")
    t0 = time.monotonic()
    v2 = cgroup_v2_only()
    top = env.tmpfile("slurm")
    shutil.rmtree(top, ignore_errors=True)
    os.mkdir(top)
    slurm = Slurm(env, top, v2)
    hook = os.path.join(env.root, "scripts", "slurm", "slurm-suspend")
    # The hook runs with the guard's environment: scontrol finds this Slurm.
    os.environ["SLURM_CONF"] = slurm.conf
    scope = "cgroup:system.slice/slurmstepd.scope" if v2 else "comm:^alloc_mix$"
    truth = os.path.join(top, "truth.json")
    g = ball = None
    pid = None
    try:
        slurm.up()
        t_up = time.monotonic() - t0
        floor = usable() - 3 * GIB
        g = Guard(env, floor, extra=["--scope", scope, "--protect", "slurmd,slurmstepd",
                                     "--on-stop", hook])
        ball = ballast(env, 5 * GIB // 2)
        job = slurm.sbatch([env.alloc_mix, "-n", str(N), "-s", "64M", "-a", "alloc", "-k",
                            "-o", truth], {"LD_LIBRARY_PATH": env.tests})
        pid = job_pid(slurm, job)
        # Slurm's cgroup for the job, where proctrack/cgroup put it.
        with open(f"/proc/{pid}/cgroup") as f:
            cgroups = f.read()
        if v2:
            assert re.search(r"^0::/system\.slice/slurmstepd\.scope/job_%s/" % job, cgroups,
                             re.M), cgroups
        else:
            for ctl in ("freezer", "cpuset"):
                assert re.search(r"^\d+:%s:/slurm(_%s)?/uid_0/job_%s/step_batch$"
                                 % (ctl, re.escape(slurm.host), job), cgroups, re.M), cgroups

        assert wait_stopped(pid, 60) is not None, \
            f"job {job} (pid {pid}) not stopped at the floor: {slurm.job(job)}"
        wait_told(g, pid, 30)
        t_stop = time.monotonic()
        # The hook: the job suspended in the scheduler, and why.
        deadline = time.monotonic() + 30
        while (st := slurm.run("squeue", "-h", "-j", job, "-o", "%t").stdout.strip()) != "S":
            assert time.monotonic() < deadline, \
                f"squeue says {st!r} for job {job}, not S: {slurm.job(job)}"
            time.sleep(0.2)
        t_suspended = time.monotonic()
        info = wait_job(slurm, job, lambda i: "umtrace" in i.get("AdminComment", ""),
                        "an AdminComment", 15)
        assert info["JobState"] == "SUSPENDED", info
        comment = info["AdminComment"]
        assert re.fullmatch(r"umtrace guard stopped pid %d \(alloc_mix, reason "
                            r"(admission|floor), \d+ bytes available\): suspended; once "
                            r"memory is back: scontrol resume %s, then umtrace resume %d"
                            % (pid, job, pid),
                            comment.strip()), comment
        assert state_of(pid) == "T", state_of(pid)
        # slurmstepd freezes the job's cgroup a moment later (SIGTSTP first).
        deadline = time.monotonic() + (20 if not v2 else 5)
        while not frozen(pid):
            if time.monotonic() > deadline:
                # Whether 22.05's cgroup/v2 freezes a suspended job was not
                # seen here (no such host): not required.
                assert v2, f"job {job}'s cgroup not frozen: {open(f'/proc/{pid}/cgroup').read()}"
                break
            time.sleep(0.05)
        t_frozen = time.monotonic()

        # Memory back; the operator resumes the job: it runs to its end.
        ball.kill()
        ball.wait(timeout=30)
        time.sleep(0.2)
        r = slurm.run("scontrol", "resume", job)
        assert r.returncode == 0, r.stderr
        # Slurm thaws the job's cgroup: the process the guard stopped stays
        # stopped (state T, seen every time here once the resume came after
        # the freeze), and the job runs on around it. A second of T after
        # the thaw, then `umtrace resume`, the AdminComment's second
        # command, continues it.
        trace, resumes = [], 0
        t_resumed = time.monotonic()
        deadline = t_resumed + 20
        while comm_of(pid) == "alloc_mix" and state_of(pid) not in (None, "Z"):
            st = state_of(pid)
            if frozen(pid):
                st = "frozen " + st
            if not trace or trace[-1][1] != st:
                trace.append((round(time.monotonic() - t_resumed, 2), st))
            if st == "T" and trace[-1][0] < time.monotonic() - t_resumed - 1 and not resumes:
                assert slurm.job(job)["JobState"] == "RUNNING", slurm.job(job)
                r = g.umtrace("resume", str(pid))
                assert r.returncode == 0, (r.stdout + r.stderr, trace)
                resumes += 1
                trace.append((round(time.monotonic() - t_resumed, 2), "umtrace resume"))
            assert time.monotonic() < deadline, \
                f"pid {pid} not done 20s after scontrol resume: {trace}"
            time.sleep(0.01)
        info = wait_job(slurm, job, lambda i: i["JobState"] not in
                        ("SUSPENDED", "RUNNING", "PENDING", "COMPLETING"),
                        "an end after the resume", 120)
        t_done = time.monotonic()
        # Stopped for a second after the thaw (the job RUNNING), and
        # continued by umtrace resume.
        assert resumes == 1, f"pid {pid} after scontrol resume: {trace}"
        assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", \
            (info, open(os.path.join(top, f"job-{job}.out")).read()[-800:])
        with open(truth) as f:
            calls = json.load(f)["calls"]["cuMemAlloc_v2"]
        assert calls["calls"] == N and calls["failed"] == 0 and \
            calls["bytes"] == N * SIZE, calls

        err = g.stop()
        g = None
        assert "resumed pid=%d" % pid in err, err[-1500:]
        # One stop, of the job's process, and the hook's word on it.
        stops = re.findall(r"guard: stop pid=(\d+) .*", err)
        assert stops == [str(pid)], err[-1500:]
        line = re.search(r"guard: stop pid=%d .*" % pid, err).group(0)
        m = re.search(r" cgroup=(\S+)", line)
        assert m, line
        if v2:
            assert f"/job_{job}/" in m.group(1), line
        else:
            # Nothing in the v2 cgroup names the job: the hook asked slurmd.
            assert "job_" not in m.group(1), line
        assert f"umtrace-slurm-suspend: job {job} suspended (pid {pid}, reason " in err, \
            err[-1500:]
    finally:
        interrupt(g.p if g is not None else None)
        if ball is not None and ball.poll() is None:
            ball.kill()
        slurm.stop([pid] if pid and comm_of(pid) == "alloc_mix" else [])
        shutil.rmtree(top, ignore_errors=True)
    print(f"    Slurm up in {t_up:.1f}s ({'cgroup/v2' if v2 else 'cgroup/v1'}, scope {scope}); "
          f"stop -> squeue S {t_suspended - t_stop:.1f}s, frozen {t_frozen - t_stop:.1f}s; "
          f"scontrol resume -> completed {t_done - t_resumed:.1f}s (pid {pid}: {trace})")


test_slurm_job_suspended_and_resumed.TIMEOUT_S = 240
