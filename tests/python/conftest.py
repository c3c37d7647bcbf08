"""Shared setup of the Python tests.

They run under tests/capi/with-registry.sh (BOXLITE_TEST_REGISTRY = the local
test registry) inside run-in-home.sh (BOXLITE_HOME = a fresh short home). The
home's config.json lists the test registry as the search registry, so the seed's
examples run unchanged except for the image name ("alpine:latest" becomes
"busybox:latest", which the registry holds as library/busybox)."""
import json
import os

import pytest

REGISTRY = os.environ.get("BOXLITE_TEST_REGISTRY")
IMAGE = "busybox:latest"
# The debian-python image with /usr/local/bin/python (tests/capi/make-python-slim.py).
PYTHON_IMAGE = os.environ.get("BOXLITE_TEST_PYTHON_IMAGE")


def pytest_configure(config):
    home = os.environ.get("BOXLITE_HOME")
    if not home or not REGISTRY:
        raise pytest.UsageError("run under tests/capi/with-registry.sh and run-in-home.sh (see tests/CMakeLists.txt)")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.json"), "w") as f:
        json.dump({"image_registries": [{"host": REGISTRY, "transport": "http", "search": True}]}, f)


@pytest.fixture
def image():
    return IMAGE


@pytest.fixture
def python_image():
    if not PYTHON_IMAGE or not os.path.isdir(PYTHON_IMAGE):
        pytest.skip("no python image (BOXLITE_TEST_PYTHON_IMAGE)")
    return PYTHON_IMAGE
