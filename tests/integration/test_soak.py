# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The soak (tests/soak/soak.py) cut to 3 minutes: guard and trace side by
side under memory churn and a loop of fake-libcuda workloads; no crash, no
stop, flat RSS, every GPU call accounted. `make soak` runs it 30 minutes."""
import json
import os
import subprocess
import sys

import harness  # noqa: E402  (tests/integration/harness.py, on sys.path)

SECONDS = 180


def test_soak_3_minutes(env):
    """Crash-free, nothing stopped, RSS of both within 10% from the first
    quarter to the last, calls seen + lost == calls made."""
    if os.path.basename(env.out).endswith("-san"):
        # ASan holds freed memory in its quarantine (256 MiB by default):
        # RSS growth says nothing about leaks there; LeakSanitizer does.
        raise harness.Skip("RSS is not a leak measure under AddressSanitizer (make SANITIZE=1)")
    report = env.tmpfile("soak.json")
    script = os.path.join(env.root, "tests", "soak", "soak.py")
    p = subprocess.run([sys.executable, script, "--out", env.out, "--report", report],
                       capture_output=True, text=True, timeout=SECONDS + 600,
                       env=dict(os.environ, SOAK_SECONDS=str(SECONDS), SOAK_SAMPLE="3"))
    print("    " + p.stdout.strip())
    with open(report) as f:
        fig = json.load(f)
    assert p.returncode == 0 and not fig["failures"], \
        "\n".join(fig["failures"]) or p.stderr[-1500:]
    assert fig["calls_made"] > 0 and fig["runs"] > 0, fig


# Its own limit: the soak's length and its subprocess's margin, plus ours.
test_soak_3_minutes.TIMEOUT_S = SECONDS + 660
