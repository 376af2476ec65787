# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The man pages (scripts/man, built into OUT/man/man8 by `make man`): each
renders without a warning from man and groff, and each command's page names
every option its --help prints, as read from the built binary now, so
neither the pages nor the help can change without the other."""
import glob
import os
import re
import shutil
import subprocess

import harness


def pages(env):
    found = sorted(glob.glob(os.path.join(env.out, "man", "man8", "*.8")))
    assert found, f"no man pages in {env.out}/man/man8 (make man)"
    return found


def sources(env):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(env.root, "scripts", "man",
                                                                      "*.8")))


def render(path):
    """The page as a reader sees it, in plain ASCII, one paragraph a line."""
    env = dict(os.environ, MANWIDTH="1000", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    p = subprocess.run(["man", "-E", "ascii", "-l", path], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 0, f"man -l {path}: {p.stderr}"
    return re.sub(r".\x08", "", p.stdout)


def run_help(env, *args):
    p = subprocess.run([env.umtrace, *args], capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, f"umtrace {' '.join(args)}: rc {p.returncode}: {p.stderr}"
    return p.stdout


def commands(env):
    """The commands `umtrace --help` lists, help itself aside."""
    text = run_help(env, "--help")
    block = text.split("Commands:", 1)[1].split("\n\n", 1)[0]
    cmds = [line.split()[0] for line in block.splitlines() if line.strip()]
    assert "trace" in cmds and "guard" in cmds, cmds
    return [c for c in cmds if c != "help"]


def help_options(text):
    """Every option an option line of a --help shows: '-p, --pid PID' gives
    -p and --pid."""
    opts = set()
    for line in text.splitlines():
        if not re.match(r"\s+-", line):
            continue
        head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        opts.update(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)", head))
    return opts


def test_man_pages_render_without_warnings(env):
    """man --warnings and groff -ww -z say nothing about any page."""
    if not shutil.which("man") or not shutil.which("groff"):
        raise harness.Skip("man or groff not installed (man-db, groff-base)")
    built = pages(env)
    assert sorted(os.path.basename(p) for p in built) == sources(env), \
        "OUT/man/man8 is not scripts/man: make man"
    menv = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    for path in built:
        p = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", path],
                           capture_output=True, text=True, env=menv, timeout=60)
        assert p.returncode == 0 and not p.stderr.strip(), f"{path}: {p.stderr}"
        g = subprocess.run(["groff", "-man", "-ww", "-z", "-Tutf8", path],
                           capture_output=True, text=True, timeout=60)
        assert g.returncode == 0 and not g.stderr.strip(), f"groff on {path}: {g.stderr}"
        text = render(path)
        assert "@VERSION@" not in text and "umtrace " in text, path
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
            assert re.search(rf"^{section}$", text, re.M), f"{path}: no {section}"


def test_man_pages_name_every_option(env):
    """umtrace(8) names every command and the global options; each command has
    its page, umtrace-CMD(8), and that page names every option `umtrace CMD
    --help` prints."""
    if not shutil.which("man"):
        raise harness.Skip("man not installed (man-db)")
    mandir = os.path.join(env.out, "man", "man8")
    cmds = commands(env)
    main_page = render(os.path.join(mandir, "umtrace.8"))
    missing = []
    for opt in help_options(run_help(env, "--help")) | {"--version", "--help"}:
        if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", main_page):
            missing.append(f"umtrace.8: {opt}")
    for cmd in cmds:
        if not re.search(rf"^\s+{cmd}\b.*\(umtrace-{cmd}\(8\)\)", main_page, re.M):
            missing.append(f"umtrace.8: command {cmd} and its page")
        path = os.path.join(mandir, f"umtrace-{cmd}.8")
        if not os.path.exists(path):
            missing.append(f"umtrace-{cmd}.8: no page (scripts/man/umtrace-{cmd}.8)")
            continue
        text = render(path)
        opts = help_options(run_help(env, cmd, "--help"))
        assert opts, f"no options parsed from umtrace {cmd} --help"
        # `umtrace help CMD` prints the same help.
        assert run_help(env, "help", cmd) == run_help(env, cmd, "--help"), cmd
        for opt in sorted(opts):
            if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text):
                missing.append(f"umtrace-{cmd}.8: {opt}")
    extra = set(sources(env)) - {"umtrace.8"} - {f"umtrace-{c}.8" for c in cmds}
    assert not extra, f"pages for no command: {sorted(extra)}"
    assert not missing, "options or commands missing from the man pages:\n" + "\n".join(missing)
