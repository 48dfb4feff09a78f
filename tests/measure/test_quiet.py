"""Kineto's native log lines are dropped from stderr; other lines written to fd 2 inside the block survive."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_native_noise_is_dropped_and_the_rest_kept():
    code = textwrap.dedent("""
        import os
        from graphroof.measure.quiet import filtered_native_stderr
        with filtered_native_stderr():
            os.write(2, b"STAGE:2024-01-01 1:2:3 ActivityProfilerController.cpp:312] Completed Stage: Warm Up\\n")
            os.write(2, b"[W kineto_shim.cpp:15] Adding profiling metadata\\n")
            os.write(2, b"a real warning\\n")
        os.write(2, b"after\\n")
    """)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stderr == "a real warning\nafter\n"
