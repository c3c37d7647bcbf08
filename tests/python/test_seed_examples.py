"""The seed's Python examples (tests/python/seed_examples/), each run as a program."""
import os
import subprocess
import sys

import pytest

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed_examples")
EXPECTED = {
    "run_in_sandbox.py": "{'exit_code': 0, 'stdout': 'hello from the box\\n', 'stderr': ''}\n",
    "verify_build.py": "stdout: hello from source build\n",
    "concurrent_exec.py": "all 16 execs returned, e.g. ['hello_0', 'hello_1', 'hello_2']\n",
    "env_timeout.py": "hi\n",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_seed_example(name):
    r = subprocess.run([sys.executable, os.path.join(HERE, name)], capture_output=True, text=True, timeout=300)
    assert (r.returncode, r.stdout) == (0, EXPECTED[name]), r.stderr


def test_seed_snapshot_clone_export():
    """The snapshots page's end-to-end example (sizes and the temporary directory vary)."""
    import re
    r = subprocess.run([sys.executable, os.path.join(HERE, "snapshot_clone_export.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"snapshot created: clean-state \(size_bytes=\d+\)\n"
                        r"clone reads: hello-from-source\n"
                        r"archive exported: /\S+/snapshot-demo-source\.boxlite\n"
                        r"imported reads: hello-from-source\n", r.stdout), r.stdout + r.stderr
