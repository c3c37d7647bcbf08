"""Records where libboxlite.so is in the build tree this package is installed from,
so an installed package finds it without BOXLITE_LIB (docs/python.md)."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPy(build_py):
    def run(self):
        super().run()
        build = os.environ.get("BOXLITE_BUILD_DIR") or os.path.join(os.path.dirname(HERE), "build")
        lib = os.path.abspath(os.path.join(build, "libboxlite.so"))
        target = os.path.join(self.build_lib, "boxlite", "_buildinfo.py")
        with open(target, "w") as f:
            f.write("# Written at install time (python/setup.py).\n")
            f.write(f"LIBRARY = {lib if os.path.exists(lib) else None!r}\n")


setup(cmdclass={"build_py": BuildPy})
