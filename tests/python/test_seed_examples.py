"""The seed's Python examples (tests/python/seed_examples/), each run as a program."""
import os
import re
import subprocess
import sys

import pytest

# The debian-python image with /usr/local/bin/python (conftest.py).
PYTHON_IMAGE = os.environ.get("BOXLITE_TEST_PYTHON_IMAGE")
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed_examples")
ID = r"uid=0\(root\) gid=0\(root\)[^\n]*\n"
# Each example's whole output, as a regular expression.
EXPECTED = {
    "run_in_sandbox.py": re.escape("{'exit_code': 0, 'stdout': 'hello from the box\\n', 'stderr': ''}\n"),
    "verify_build.py": re.escape("stdout: hello from source build\n"),
    "concurrent_exec.py": re.escape("all 16 execs returned, e.g. ['hello_0', 'hello_1', 'hello_2']\n"),
    "env_timeout.py": re.escape("hi\n"),
    # SecurityOptions.maximum(), refused by the vm engine before issue 35.
    "security_maximum_faq.py": ID,
    "security_maximum_concurrent.py": "exit=0\nexit=0\nexit=0\n",
    "security_maximum_native.py": "exit=0\n",
    "security_maximum_simplebox.py": ID + "\n",
    "security_maximum_secrets.py": "secrets \\+ hardening ready\n\n",
    # The snapshots page's end-to-end example (sizes and the temporary directory vary).
    "snapshot_clone_export.py": (r"snapshot created: clean-state \(size_bytes=\d+\)\n"
                                 r"clone reads: hello-from-source\n"
                                 r"archive exported: /\S+/snapshot-demo-source\.boxlite\n"
                                 r"imported reads: hello-from-source\n"),
}


def run_example(name):
    """Runs the example, its "python:slim" being the local python image (the test
    registry has none); returns the finished process."""
    with open(os.path.join(HERE, name)) as f:
        source = f.read()
    if '"python:slim"' in source:
        if not PYTHON_IMAGE or not os.path.isdir(PYTHON_IMAGE):
            pytest.skip("no python image (BOXLITE_TEST_PYTHON_IMAGE)")
        source = source.replace('"python:slim"', repr(PYTHON_IMAGE))
    return subprocess.run([sys.executable, "-"], input=source, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_seed_example(name):
    r = run_example(name)
    assert r.returncode == 0 and re.fullmatch(EXPECTED[name], r.stdout), r.stdout + r.stderr

