# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Bash completion (scripts/completion/umtrace) driven as bash drives it:
bash-completion sourced, COMP_WORDS and COMP_CWORD set, _umtrace called,
COMPREPLY read back."""
import os
import re
import shlex
import signal
import subprocess

import harness

BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"


def complete(env, *cases):
    """COMPREPLY for each case, a list of words (the last one being
    completed, "" for a new word)."""
    script = [f". {BASH_COMPLETION}",
              f". {shlex.quote(os.path.join(env.root, 'scripts', 'completion', 'umtrace'))}",
              # compopt only works inside a completion bash itself runs.
              "compopt() { :; }",
              "t() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); COMP_LINE=\"$*\";"
              " COMP_POINT=${#COMP_LINE}; COMPREPLY=();"
              " _umtrace \"$1\" \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\";"
              " printf '%s\\n' \"${COMPREPLY[@]}\"; echo '--end--'; }"]
    for words in cases:
        script.append("t " + " ".join(shlex.quote(w) for w in (env.umtrace, *words)))
    p = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True,
                       timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr
    out = p.stdout.split("--end--\n")
    assert len(out) == len(cases) + 1, (out, p.stderr)
    return [[w for w in o.split("\n") if w] for o in out[:-1]]


def long_options(env, cmd):
    p = subprocess.run([env.umtrace, cmd, "--help"], capture_output=True, text=True, timeout=20)
    return {m for line in p.stdout.splitlines() if re.match(r"\s+-", line)
            for m in re.findall(r"--[a-z0-9][\w-]*", re.split(r"\s{2,}", line.strip())[0])}


def test_completion_commands_options_values(env):
    """Commands, each command's options (as its --help has them now), and
    the values of options that take a fixed set, a size or an interval."""
    if not os.path.exists(BASH_COMPLETION):
        raise harness.Skip("bash-completion not installed")
    # The commands as `umtrace --help` lists them now.
    text = subprocess.run([env.umtrace, "--help"], capture_output=True, text=True,
                          timeout=20).stdout
    block = text.split("Commands:", 1)[1].split("\n\n", 1)[0]
    cmds = [l.split()[0] for l in block.splitlines() if l.strip() and l.split()[0] != "help"]
    assert "guard" in cmds, text
    got = complete(env, [""], ["tr"], ["help", "g"], ["trace", "--ring"],
                   *[[c, "--"] for c in cmds],
                   ["guard", "--floor", "3"], ["guard", "--floor=3"],
                   ["trace", "--ringbuf-size", "64"], ["report", "--rescan", "2"],
                   ["guard", "--action", ""], ["top", "--platform", "d"],
                   ["flamegraph", "-f", "s"], ["flamegraph", "--metric", ""],
                   ["guard", "--metric", ""], ["top", "-s", "g"], ["report", "--stack", ""],
                   ["guard", "--scope", ""], ["guard", "--page-programs", "a"], ["--v"])
    it = iter(got)
    first = next(it)
    assert sorted(first) == sorted(cmds + ["help"]), f"completes {first}, --help has {cmds}"
    assert next(it) == ["trace"]
    assert next(it) == ["guard"]
    assert next(it) == ["--ringbuf-size"]
    for c in cmds:
        opts = next(it)
        want = long_options(env, c) - ({"--pid"} if c == "guard" else set())
        assert set(opts) == want, f"{c}: completes {sorted(opts)}, --help has {sorted(want)}"
    assert next(it) == ["3K", "3M", "3G", "3T", "3%"]
    assert next(it) == ["3K", "3M", "3G", "3T", "3%"], "--floor=3: the = form"
    assert next(it) == ["64K", "64M", "64G", "64T"]
    assert next(it) == ["2ms", "2s", "2m", "2h"]
    assert next(it) == ["stop", "freeze"]
    assert next(it) == ["discrete"]
    assert next(it) == ["svg", "speedscope"]
    assert next(it) == ["host", "gpu", "calls"]
    assert next(it) == ["available", "free"]
    assert next(it) == ["gpu", "growth"]
    assert next(it) == ["fp", "dwarf", "auto"]
    assert next(it) == ["gpu", "all", "pid:", "cgroup:", "comm:"]
    assert next(it) == ["auto", "always"]
    assert next(it) == ["--version"]


def test_completion_pids_files_commands(env):
    """Pids (one, the last of a list, a pid: scope), stopped pids for
    resume, cgroups for a cgroup: scope, files for recordings and outputs,
    and the command after --."""
    if not os.path.exists(BASH_COMPLETION):
        raise harness.Skip("bash-completion not installed")
    sleeper = env.popen(["sleep", "300"])
    stopped = env.popen(["sleep", "300"])
    os.kill(stopped.pid, signal.SIGSTOP)
    tmp = env.tmpfile("comp")
    os.makedirs(tmp)
    for name in ("job.umt", "job2.umt", "other.txt"):
        open(os.path.join(tmp, name), "w").close()
    cgroot = next((r for r in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
                   if os.path.exists(os.path.join(r, "cgroup.controllers"))), None)
    cgname = f"umtrace-test-{os.getpid()}-comp"
    if cgroot:
        os.makedirs(os.path.join(cgroot, cgname), exist_ok=True)
    try:
        sp = str(sleeper.pid)
        got = complete(env, ["trace", "-p", sp], ["top", "--pid", f"1,{sp}"],
                       ["guard", "--scope", f"pid:{sp}"], ["resume", ""],
                       ["report", os.path.join(tmp, "job")],
                       ["timeline", "-o", os.path.join(tmp, "ot")],
                       ["trace", "--", "slee"], ["record", "-o", "x", "--", "sleep", "3"],
                       ["guard", "--scope", f"cgroup:{cgname[:-3]}"])
        assert sp in got[0], got[0]
        assert f"1,{sp}" in got[1], got[1]
        # bash shows only what follows a colon (it breaks words there).
        assert sp in got[2], got[2]
        assert str(stopped.pid) in got[3] and sp not in got[3], (got[3], sp, stopped.pid)
        assert sorted(got[4]) == [os.path.join(tmp, "job.umt"), os.path.join(tmp, "job2.umt")], \
            got[4]
        assert got[5] == [os.path.join(tmp, "other.txt")], got[5]
        assert "sleep" in got[6], got[6]
        assert got[7] == [], got[7]
        if cgroot:
            assert got[8] == [f"{cgname}/"], got[8]
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
        if cgroot:
            os.rmdir(os.path.join(cgroot, cgname))
