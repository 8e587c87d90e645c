"""Another git revision of aiokproto, ready to import: ``make bench-base BASE=<rev>``.

``python -m benchmarks.build_base REV DIR`` extracts REV's tree into DIR and builds its
compiled codec in place, so that ``BENCH_AIOKPROTO_BASE=DIR`` (the ``aiokproto-base``
adapter) runs that revision beside this checkout in one benchmark run. The build reads
no ``pyproject.toml`` (an old revision's metadata may not suit today's setuptools):
only the revision's own ``aiokproto/*.c`` sources are compiled.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def extract(rev: str, into: Path) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "archive", commit], check=True, stdout=tar)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as t:
            t.extractall(into, filter="data")
    return commit


def build(tree: Path) -> list[str]:
    """Compile each ``aiokproto/**/_*.c`` of ``tree`` next to its source."""
    from setuptools import Extension, setup

    sources = sorted(tree.glob("aiokproto/**/_*.c"))
    extensions = [
        Extension(
            ".".join(src.relative_to(tree).with_suffix("").parts),
            sources=[str(src)],
            extra_compile_args=["-O2"],
        )
        for src in sources
    ]
    with tempfile.TemporaryDirectory() as work:
        cwd = os.getcwd()
        os.chdir(work)  # no pyproject.toml or setup.cfg of either tree is read
        try:
            setup(
                name="aiokproto-base",
                ext_modules=extensions,
                script_args=["-q", "build_ext", "--build-lib", str(tree),
                             "--build-temp", work],
            )
        finally:
            os.chdir(cwd)
    return [e.name for e in extensions]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.build_base",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("rev")
    ap.add_argument("dir", type=Path)
    args = ap.parse_args(argv)
    tree = args.dir.resolve()
    commit = extract(args.rev, tree)
    built = build(tree)
    print(f"{args.rev} ({commit[:12]}) in {tree}; compiled: {', '.join(built) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
