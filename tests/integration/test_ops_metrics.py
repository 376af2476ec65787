# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The operators' own stack, for real: the guard's metrics file served by
node_exporter's textfile collector, scraped by Prometheus with the shipped
alert rules, the alerts delivered by Alertmanager to a webhook, and the
Grafana dashboard's queries run against that Prometheus.

Every service is the Debian package's binary (prometheus,
prometheus-node-exporter, prometheus-alertmanager: `install-deps.sh
--test`), started here with a configuration of this test's own, on
127.0.0.1 and ports free at run time, its data in a temporary directory,
and killed at the end whatever happens. The webhook is an HTTP server in
this process, on loopback.

The rules are scripts/prometheus/umtrace.rules.yml with one change: every
`for:` (5 to 30 minutes there) is 2s here, so that an alert fires within
the test; the expressions are the shipped ones. UmtraceGuardStoppedJob
(no `for:`), UmtraceGuardJobsHeld and UmtraceGuardHeadroomLow fire and
are delivered; UmtraceGuardJobsHeld is resolved after `umtrace resume`
and UmtraceGuardDown fires once the guard has exited. Three cannot fire
in a test of minutes, whatever their `for:`: UmtraceGuardMetricsStale
(the file must be 120 s old), UmtraceProcessHostMemoryGrowing and
UmtraceTorchReservedGrowing (`offset 30m` and 30-minute slopes); their
expressions are checked by `promtool test rules` (test_install.py), and
here only loaded by Prometheus without an error.

The state every metric needs: a job taking 32 MiB every 400 ms toward a
floor 2 GiB below what is available (a slide: umtrace_seconds_to_floor
for the host and for the job; --warn-eta 10m: a warning; then a stop at
the floor), a torch_alloc job under --torch (umtrace_torch_*), and
--postmortem-dir (the flight recorder's gauges). A 1 GiB ballast, ended
after the stop, leaves the room for the resumed job to finish.

README's single-host recipe goes through promtool and amtool as given:
its rule_files with the shipped rules, its Alertmanager route taking the
umtrace alerts and no other."""
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

from harness import Skip, interrupt
from test_guard import GIB, MIB, Guard, ballast, resume_until_done, usable, wait_stopped, \
    wait_told

# The binaries, each its Debian package's name; promtool and amtool come with two.
SERVICES = ("prometheus", "prometheus-node-exporter", "prometheus-alertmanager", "promtool",
            "amtool")
FOR = "2s"
# The figures README's `umtrace guard` section and umtrace-guard(8)'s
# METRICS name, each of which must come out of Prometheus as a series (the
# file's other families too, below). The page writes the guard's by their
# suffix after the first: \fB_low_bytes\fR is umtrace_guard_low_bytes.
NAME = r"umtrace_(?:guard|torch)_[a-z_]+|umtrace_seconds_to_floor"


def documented(env):
    with open(os.path.join(env.root, "scripts", "man", "umtrace-guard.8")) as f:
        man = f.read()
    sec = man[man.index(".SH METRICS"):]
    sec = sec[:sec.index("\n.SH ", 1)]
    names = {m if m.startswith("umtrace_") else "umtrace_guard" + m
             for m in re.findall(r"\\fB(%s|_[a-z_]+)\\fR" % NAME, sec)}
    with open(os.path.join(env.root, "README.md")) as f:
        readme = f.read()
    guard = readme[readme.index("\n## umtrace guard\n"):]
    guard = guard[:guard.index("\n## ", 1)]
    names |= set(re.findall(r"\b(%s)\b(?![.\w])" % NAME, guard))
    assert len(names) >= 30, sorted(names)
    return names


def readme_recipe(env):
    """README's single-host recipe: its prometheus.yml and alertmanager.yml parts."""
    with open(os.path.join(env.root, "README.md")) as f:
        readme = f.read()
    part = readme[readme.index("**Metrics on one host, step by step.**"):]
    blocks = re.findall(r"^```\n(.*?)^```$", part[:part.index("\n## ")], re.M | re.S)
    prom = [b for b in blocks if b.startswith("rule_files:")]
    am = [b for b in blocks if b.startswith("route:")]
    sed = [l for b in blocks for l in b.splitlines() if l.startswith("sed -i ")]
    assert len(prom) == 1 and len(am) == 1 and len(sed) == 1, blocks
    return prom[0], am[0], sed[0]


def check_recipe(env, top):
    """README's snippets through promtool and amtool, as an operator would:
    the rules file it names (here the shipped one), the route that takes
    the umtrace alerts."""
    prom, am, sed = readme_recipe(env)
    # The line that sets metrics_file, on the configuration make install puts.
    conf = os.path.join(top, "guard.conf")
    shutil.copy(os.path.join(env.root, "scripts", "guard.conf.example"), conf)
    sed = sed.replace("/etc/umtrace/guard.conf", conf)
    p = subprocess.run(["sh", "-c", sed], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    with open(conf) as f:
        set_lines = [l for l in f.read().splitlines() if l.startswith("metrics_file")]
    assert set_lines == ["metrics_file = /var/lib/prometheus/node-exporter/umtrace_guard.prom"], \
        set_lines
    shipped = os.path.join(env.root, "scripts", "prometheus", "umtrace.rules.yml")
    assert "/etc/prometheus/umtrace.rules.yml" in prom, prom
    path = os.path.join(top, "recipe-prometheus.yml")
    with open(path, "w") as f:
        f.write(prom.replace("/etc/prometheus/umtrace.rules.yml", shipped))
    p = subprocess.run(["promtool", "check", "config", path], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "7 rules found" in p.stdout, p.stdout + p.stderr
    path = os.path.join(top, "recipe-alertmanager.yml")
    with open(path, "w") as f:
        f.write(am)
    p = subprocess.run(["amtool", "check-config", path], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    for labels, receiver in ((["alertname=UmtraceGuardStoppedJob", "instance=gpu1:9100"],
                              "gpu-oncall"),
                             (["alertname=NodeFilesystemFull"], "default")):
        p = subprocess.run(["amtool", "config", "routes", "test", f"--config.file={path}",
                            *labels], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and p.stdout.strip() == receiver, \
            f"{labels}: {p.stdout}{p.stderr}"



def free_port():
    """A loopback port nobody listens on now (the service binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


class Hook:
    """Alertmanager's webhook receiver: every notification's JSON, in order."""

    def __init__(self):
        self.got = []
        self.lock = threading.Lock()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with hook.lock:
                    hook.got.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def alerts(self):
        """(alertname, status) of every alert in every notification so far."""
        with self.lock:
            return [(a["labels"]["alertname"], a["status"])
                    for n in self.got for a in n["alerts"]]

    def wait(self, name, status, timeout):
        deadline = time.monotonic() + timeout
        while (name, status) not in self.alerts():
            assert time.monotonic() < deadline, \
                f"no {status} {name} from Alertmanager in {timeout}s: {self.alerts()}"
            time.sleep(0.1)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Stack:
    """node_exporter, Prometheus and Alertmanager, this test's own."""

    def __init__(self, env, top, rules, hook_port):
        self.env, self.top, self.procs = env, top, []
        self.rules, self.hook_port = rules, hook_port
        self.textfile = os.path.join(top, "textfile")
        os.mkdir(self.textfile)
        self.ne, self.prom, self.am = free_port(), free_port(), free_port()

    def up(self):
        """Start the three, each waited for until it answers; stop() ends
        what was started even when one of them failed."""
        top, rules, hook_port = self.top, self.rules, self.hook_port
        am_conf = os.path.join(top, "alertmanager.yml")
        # YAML is a superset of JSON: these configurations are written as JSON.
        with open(am_conf, "w") as f:
            json.dump({"route": {"receiver": "test", "group_by": ["alertname"],
                                 "group_wait": "1s", "group_interval": "1s",
                                 "repeat_interval": "1h"},
                       "receivers": [{"name": "test", "webhook_configs": [
                           {"url": f"http://127.0.0.1:{hook_port}/hook",
                            "send_resolved": True}]}]}, f)
        prom_conf = os.path.join(top, "prometheus.yml")
        with open(prom_conf, "w") as f:
            json.dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                       "rule_files": [rules],
                       "alerting": {"alertmanagers": [
                           {"static_configs": [{"targets": [f"127.0.0.1:{self.am}"]}]}]},
                       "scrape_configs": [{"job_name": "node", "static_configs": [
                           {"targets": [f"127.0.0.1:{self.ne}"]}]}]}, f)
        self.start("alertmanager", ["prometheus-alertmanager", f"--config.file={am_conf}",
                                    f"--storage.path={top}/am-data",
                                    f"--web.listen-address=127.0.0.1:{self.am}",
                                    "--cluster.listen-address="],
                   f"http://127.0.0.1:{self.am}/-/ready")
        self.start("node_exporter", ["prometheus-node-exporter",
                                     f"--web.listen-address=127.0.0.1:{self.ne}",
                                     "--collector.disable-defaults", "--collector.textfile",
                                     f"--collector.textfile.directory={self.textfile}"],
                   f"http://127.0.0.1:{self.ne}/metrics")
        self.start("prometheus", ["prometheus", f"--config.file={prom_conf}",
                                  f"--storage.tsdb.path={top}/prom-data",
                                  f"--web.listen-address=127.0.0.1:{self.prom}"],
                   f"http://127.0.0.1:{self.prom}/-/ready")

    def start(self, name, argv, ready, timeout=30):
        log = open(os.path.join(self.top, name + ".log"), "w")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT)
        log.close()
        self.procs.append((name, p))
        deadline = time.monotonic() + timeout
        while True:
            assert p.poll() is None, f"{name} exited ({p.returncode}): {self.log(name)}"
            try:
                if http_get(ready, timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, f"{name} not ready in {timeout}s: {self.log(name)}"
            time.sleep(0.2)

    def log(self, name):
        with open(os.path.join(self.top, name + ".log")) as f:
            return f.read()[-1500:]

    def api(self, path, **params):
        _, body = http_get(f"http://127.0.0.1:{self.prom}/api/v1/{path}?"
                           + urllib.parse.urlencode(params, doseq=True), timeout=30)
        out = json.loads(body)
        assert out["status"] == "success", out
        return out["data"]

    def series(self, expr, start):
        """The expression as a graph over [start, now] at 1 s: its series."""
        return self.api("query_range", query=expr, start=f"{start:.3f}",
                        end=f"{time.time():.3f}", step="1")["result"]

    def wait_series(self, expr, start, timeout=30):
        deadline = time.monotonic() + timeout
        while not (got := self.series(expr, start)):
            assert time.monotonic() < deadline, f"no series for {expr} in {timeout}s"
            time.sleep(0.5)
        return got

    def stop(self):
        for _, p in self.procs:
            if p.poll() is None:
                p.terminate()
        for _, p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)


def short_rules(env, path):
    """The shipped rules with every `for:` set to FOR; nothing else changed."""
    with open(os.path.join(env.root, "scripts", "prometheus", "umtrace.rules.yml")) as f:
        text = f.read()
    fors = len(re.findall(r"^\s+for: ", text, re.M))
    short, n = re.subn(r"^(\s+for: )\S+$", r"\g<1>" + FOR, text, flags=re.M)
    assert n == fors == 6, f"{n} of {fors} for: lines rewritten"
    with open(path, "w") as f:
        f.write(short)
    return [l for l in text.splitlines() if not re.match(r"\s+for: ", l)] == \
        [l for l in short.splitlines() if not re.match(r"\s+for: ", l)]


def dashboard_queries(env):
    """(what, PromQL) of every panel target and annotation of the dashboard,
    its $instance variable left to match every instance."""
    with open(os.path.join(env.root, "scripts", "grafana", "umtrace.json")) as f:
        dash = json.load(f)
    out = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            out.append((f"panel {panel['title']!r}", t["expr"]))
    for a in dash["annotations"]["list"]:
        if a.get("expr"):
            out.append((f"annotation {a['name']!r}", a["expr"]))
    assert len(out) >= 8, out
    variables = [v for v in dash["templating"]["list"] if v["name"] == "instance"]
    assert variables, "the dashboard has no $instance variable"
    return [(w, q.replace("$instance", ".+")) for w, q in out], variables[0]


def test_ops_metrics_pipeline(env):
    """Guard -> textfile -> node_exporter -> Prometheus (shipped rules, `for:`
    2s) -> Alertmanager -> webhook: a stop fires UmtraceGuardStoppedJob and
    UmtraceGuardJobsHeld, `umtrace resume` resolves the latter, the guard's
    exit fires UmtraceGuardDown; every metric the guard documents, and every
    query of scripts/grafana/umtrace.json, returns series from Prometheus."""
    missing = [b for b in SERVICES if not shutil.which(b)]
    if missing:
        raise Skip(f"not installed: {', '.join(missing)} (Debian packages prometheus, "
                   "prometheus-node-exporter, prometheus-alertmanager; "
                   "scripts/install-deps.sh --test)")
    c10, torch_alloc = (os.path.join(env.tests, n) for n in ("libc10.so", "torch_alloc"))
    for p in (c10, torch_alloc):
        if not os.path.exists(p):
            raise Skip(f"{p} not built")
    t0 = time.monotonic()
    top = env.tmpfile("ops")
    shutil.rmtree(top, ignore_errors=True)
    os.mkdir(top)
    rules = os.path.join(top, "umtrace.rules.yml")
    assert short_rules(env, rules), "the rules' copy differs in more than its for: lines"
    queries, variable = dashboard_queries(env)
    names = documented(env)
    check_recipe(env, top)
    hook = Hook()
    stack = Stack(env, top, rules, hook.port)
    g = None
    try:
        stack.up()
        start = time.time()
        t_stack = time.monotonic() - t0
        # The rules as Prometheus loaded them: all 7, each evaluated without an error.
        deadline = time.monotonic() + 30
        while True:
            groups = stack.api("rules")["groups"]
            loaded = {r["name"]: r["health"] for grp in groups for r in grp["rules"]}
            assert len(loaded) == 7 and "err" not in loaded.values(), loaded
            if set(loaded.values()) == {"ok"}:
                break
            assert time.monotonic() < deadline, f"rules not evaluated in 30s: {loaded}"
            time.sleep(0.5)

        ball = ballast(env, GIB)
        floor = usable() - 2 * GIB
        prom = os.path.join(stack.textfile, "umtrace.prom")
        g = Guard(env, floor, extra=["--metrics-file", prom, "--torch", "--libc10", c10,
                                     "--postmortem-dir", os.path.join(top, "pm"),
                                     "--warn-eta", "10m",
                                     "--scope", "comm:^(alloc_mix|torch_alloc)$"])
        torch = env.popen([torch_alloc, "-m", "steady", "-s", "100000", "-w", "300",
                           "-o", "/dev/null"])
        stack.wait_series('umtrace_torch_reserved_bytes{pid="%d"}' % torch.pid, start, 30)
        job = env.popen([env.alloc_mix, "-n", "72", "-s", "32M", "-a", "alloc", "-k",
                         "-o", "/dev/null"], env={**os.environ, "FAKECUDA_DELAY_MS": "400"})
        assert wait_stopped(job.pid, 90) is not None, "the job was not stopped at the floor"
        wait_told(g, job.pid, 30)
        t_stop = time.monotonic()
        hook.wait("UmtraceGuardStoppedJob", "firing", 60)
        hook.wait("UmtraceGuardJobsHeld", "firing", 60)
        t_fired = time.monotonic()
        stack.wait_series('umtrace_guard_process_stopped{pid="%d"} == 1' % job.pid, start)

        # Room for the rest of its allocations, then resume: the held alert ends.
        ball.kill()
        ball.wait(timeout=30)
        resume_until_done(g, job, floor, 120)
        hook.wait("UmtraceGuardJobsHeld", "resolved", 60)
        t_resolved = time.monotonic()
        stack.wait_series("sgn(max_over_time(umtrace_guard_stopped_processes[1m])"
                          " - umtrace_guard_stopped_processes) == 1", start)

        # Every family in the file, and every documented one, as a series.
        with open(prom) as f:
            families = set(re.findall(r"^# TYPE (\S+) ", f.read(), re.M))
        assert families, "no families in the guard's file"
        # The driver's pool is kept only with the page programs attached for
        # good (test_guard_driver_pool reads it in the file); this guard's are not.
        names.discard("umtrace_guard_driver_pool_bytes")
        empty = [n for n in sorted(families | names) if not stack.series(n, start)]
        assert not empty, f"no series in Prometheus for {empty}"
        # The states they were set up for, by the jobs' own pids.
        for expr in ('umtrace_seconds_to_floor{pid=""}',
                     'umtrace_seconds_to_floor{pid="%d",comm="alloc_mix"}' % job.pid,
                     'umtrace_guard_process_warned{pid="%d"} == 1' % job.pid,
                     'umtrace_guard_process_host_bytes{pid="%d"} > %d' % (job.pid, GIB),
                     'umtrace_torch_allocated_bytes{pid="%d",device="0"} > 0' % torch.pid,
                     'umtrace_torch_reserved_bytes{pid="%d",device="0"} >= %d'
                     % (torch.pid, 40 * MIB),
                     "umtrace_guard_warnings_total >= 1",
                     "umtrace_guard_stops_total >= 1",
                     'node_textfile_mtime_seconds{file=~".*umtrace.*\\\\.prom"}'):
            assert stack.series(expr, start), f"no series for {expr}"
        # The dashboard: every panel's query and annotation returns data, and
        # each annotation marks at least one moment (Grafana draws a 1).
        for what, expr in queries:
            got = stack.series(expr, start)
            assert got, f"{what}: no data for {expr}"
            if what.startswith("annotation"):
                assert any(v == "1" for s in got for _, v in s["values"]), f"{what}: {got}"
        m = re.fullmatch(r"label_values\((.+), *instance\)", variable["query"]["query"])
        assert m, variable
        values = stack.api("label/instance/values", **{"match[]": m.group(1), "start": start})
        assert values == [f"127.0.0.1:{stack.ne}"], values

        # The guard's exit: its last file says up 0.
        torch.kill()
        torch.wait(timeout=30)
        g.stop()
        g = None
        hook.wait("UmtraceGuardDown", "firing", 60)
        t_down = time.monotonic()
        # What reached the webhook is about this test's host only, its
        # annotations rendered from the rule's templates.
        with hook.lock:
            got = [a for n in hook.got for a in n["alerts"]]
        here = f"127.0.0.1:{stack.ne}"
        assert {a["labels"].get("instance") for a in got} == {here}, got
        summaries = [a["annotations"]["summary"] for a in got
                     if a["labels"]["alertname"] == "UmtraceGuardStoppedJob"]
        assert all(x.startswith(f"umtrace guard stopped a job on {here} (") for x in summaries) \
            and summaries, summaries
    finally:
        interrupt(g.p if g is not None else None)
        stack.stop()
        hook.close()
        shutil.rmtree(top, ignore_errors=True)
    print(f"    stack up in {t_stack:.1f}s; stop -> both alerts delivered "
          f"{t_fired - t_stop:.1f}s; resume -> resolved {t_resolved - t_fired:.1f}s; "
          f"guard's exit -> down {t_down - t_resolved:.1f}s; {len(families | names)} metrics, "
          f"{len(queries)} dashboard queries; {len(hook.got)} notifications")


test_ops_metrics_pipeline.TIMEOUT_S = 240
