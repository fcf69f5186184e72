"""Build hook: wheels get the scheduler core compiled with mypyc; editable installs stay Python.

The core (``src/phalanx/scheduler``) is plain typed Python and runs as such. Compiled
with mypyc it runs about twice as fast, which is what the benchmarks measure. An
editable install would put the compiled modules next to the sources, where they
would shadow every later edit, so ``pip install -e .`` never compiles.

Without a C compiler the wheel is pure Python, with a note; ``PHALANX_COMPILE=0`` asks
for that, ``PHALANX_COMPILE=1`` makes a missing compiler an error. Everything else about
the project lives in ``pyproject.toml``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
CORE = sorted(
    str(path.relative_to(HERE))
    for path in (HERE / "src" / "phalanx" / "scheduler").rglob("*.py")
    if path.name != "__init__.py"
)
# Commands that build what is installed; metadata-only runs (egg_info, dist_info) and
# editable installs (editable_wheel, develop) do not compile.
BUILDS = {"bdist_wheel", "build", "build_ext", "install"}


def compile_core() -> bool:
    choice = os.environ.get("PHALANX_COMPILE", "").strip().lower()
    if choice in {"0", "false", "no", "off"}:
        return False
    args = set(sys.argv[1:])
    if not args & BUILDS or args & {"editable_wheel", "develop"}:
        return False
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        if choice in {"1", "true", "yes", "on"}:
            raise SystemExit(f"PHALANX_COMPILE=1 but no C compiler ({compiler}) is installed")
        print(f"phalanx: no C compiler ({compiler}): the scheduler core is installed as "
              "Python (about half as fast)", file=sys.stderr)
        return False
    return True


def extensions() -> list:  # type: ignore[type-arg]
    if not compile_core():
        return []
    from mypyc.build import mypycify

    os.chdir(HERE)  # mypycify reads the module paths and writes C under build/ from here
    return mypycify(CORE, opt_level="3")


setup(ext_modules=extensions())
