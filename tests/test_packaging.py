"""The wheel: built from the source tree as a user's pip would, with a C compiler (the
compiled codec inside) and without one (pure Python, and it still works)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _source_tree(dest: Path) -> Path:
    """The files git knows (tracked or new), without anything built in place."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for name in listed:
        src = ROOT / name
        if src.is_file() and not name.startswith(("tests/", "benchmarks/", "docs/")):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _wheel(tmp: Path, env: dict[str, str]) -> Path:
    src = _source_tree(tmp / "src")
    out = tmp / "wheel"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = out.glob("aiokproto-*.whl")
    return wheel


def _implementation(wheel: Path, tmp: Path) -> str:
    target = tmp / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOKPROTO_")}
    # -S with site-packages on PYTHONPATH: the dependencies, but not the checkout's
    # editable-install hook (a .pth file), which would find its own aiokproto._accel
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env["PYTHONPATH"] = os.pathsep.join([str(target), *paths])
    code = (
        "import aiokproto, aiokproto.accel as a; assert aiokproto.__file__.startswith("
        f"{str(target)!r}), aiokproto.__file__; print(a.implementation())"
    )
    # run from the target: from the checkout, "" on sys.path would find its aiokproto
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=target,
    ).stdout.strip()


@pytest.mark.skipif(
    shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler here"
)
def test_the_wheel_carries_the_compiled_codec(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, dict(os.environ))
    assert any(
        n.startswith("aiokproto/_accel.") and n.endswith(".so")
        for n in zipfile.ZipFile(wheel).namelist()
    )
    assert _implementation(wheel, tmp_path) == "compiled"


def test_without_a_compiler_the_wheel_is_pure_python_and_works(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {**os.environ, "CC": "/bin/false"})
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    assert _implementation(wheel, tmp_path) == "python"
