# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Reserved between the hook's windows, from the driver calls that make
the allocator's segments (user/model/torch_seg.h): torch_alloc -m churn
gives its segments back (empty_cache) after every step with no hook call
after it, and makes and frees one 96 MiB segment in its middle step, at a
pace far past a window's budget, with the default windows on. The hook's
last figure is then stale; the calls' is the job's own."""
from harness import interrupt, wait_line
from test_torch import DISCRETE, WINDOW_LINE, paths, report_cmd, top_while, truth_of

# 128 hook calls a step, about 85 steps a second (11,000 calls): windows close on their budget.
CHURN = ["-m", "churn", "-t", "64", "-b", "64K", "-w", "10", "-s", "300"]
MIB = 1 << 20


def fmt_mib(n):
    """top's figure for a whole number of MiB under 1000."""
    assert n % MIB == 0 and n < 1000 * MIB, n
    return f"{n // MIB}M"


def test_torch_seg_report(env):
    """report: reserved at the job's end is what its last empty_cache left,
    which no hook call said (the last one said more); its peak is the 96 MiB
    segment's, made and given back at once (the hook's windows alone saw
    it in one run of three); the figure marked as the calls'."""
    objs, err, truth = report_cmd(env, CHURN, extra=["-v"])
    m = WINDOW_LINE.search(err)
    assert m and int(m.group(3)) >= 1, err[-600:]	# windows closed on their budget
    assert len(objs) == 1, objs
    o, final, last = objs[0], truth["final"], truth["last_report"]
    assert o["counts_windowed"] and o["allocs"] < final["allocs"], (o, final)
    # What the hook was last told is not the end: empty_cache came after it.
    assert last["reserved"] > final["reserved"], (last, final)
    assert o["reserved"] == final["reserved"] and o["reserved_from_calls"], (o, final)
    assert o["cached"] == final["reserved"] - o["allocated"], o
    assert o["peak_reserved"] == final["peak_reserved"], (o, final)
    print(f"    reserved {o['reserved'] // MIB} MiB (the hook's last: {last['reserved'] // MIB}),"
          f" peak {o['peak_reserved'] // MIB} MiB; {o['allocs']} of {final['allocs']} "
          f"block allocations seen; {m.group(0)}")


def test_torch_seg_top(env):
    """top while the job idles after its last empty_cache: RESERVED is the
    job's own figure then, not the hook's last."""
    c10, job = paths(env)
    truth = env.tmpfile("torch-seg-top.json")
    top = env.popen([env.umtrace, "top", "-b", "-i", "250ms", "--libcuda", env.fake,
                     "--libc10", c10], env=DISCRETE)
    try:
        wait_line(top.stderr, "probing PyTorch", 30)
        p, seen, text = top_while(env, top, [job, *CHURN, "-o", truth])
    finally:
        interrupt(top)
    assert p.returncode == 0, p.stderr.read()
    t = truth_of(truth)
    end = max((s for s, snap in seen if p.pid in snap), default=None)
    assert end is not None, text[-2000:]
    # The 2 s idle: snapshots from its second half, wherever top's ticks fall.
    idle = [snap[p.pid] for s, snap in seen if p.pid in snap and s >= end - 0.9]
    want = fmt_mib(t["final"]["reserved"])
    assert idle and all(r["reserved"] == want for r in idle), \
        (want, fmt_mib(t["last_report"]["reserved"]), [r["line"] for r in idle])
    print(f"    {len(idle)} snapshots in the idle: RESERVED {want} "
          f"(the hook's last: {fmt_mib(t['last_report']['reserved'])})")

