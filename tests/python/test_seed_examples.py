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
