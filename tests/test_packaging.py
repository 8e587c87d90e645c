"""The wheel: built from the source tree as a user's pip would, with a C compiler (the
compiled codec inside) and without one (pure Python, and it still works, saying once
what that costs); it carries only files read at run time; installed into a fresh venv
it runs the quickstart against the test broker. (``make dist`` builds the published
artifacts; this builds the running interpreter's wheel only, to stay cheap.)"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from aiokproto import Consumer, accel
from aiokproto.testing import KafkaService

ROOT = Path(__file__).resolve().parent.parent


def _source_tree(dest: Path) -> Path:
    """The files git knows (tracked or new), without anything built in place."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for name in listed:
        src = ROOT / name
        if src.is_file() and not name.startswith(("tests/", "benchmarks/", "docs/", "tools/")):
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


_HAS_CC = shutil.which("gcc") is not None or shutil.which("cc") is not None


@pytest.fixture(scope="module")
def compiled_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not _HAS_CC:
        pytest.skip("no C compiler here")
    return _wheel(tmp_path_factory.mktemp("compiled"), dict(os.environ))


def test_the_wheel_carries_the_compiled_codec(compiled_wheel: Path, tmp_path: Path) -> None:
    assert any(
        n.startswith("aiokproto/_accel.") and n.endswith(".so")
        for n in zipfile.ZipFile(compiled_wheel).namelist()
    )
    assert _implementation(compiled_wheel, tmp_path) == "compiled"


def test_the_wheel_carries_only_what_runs(compiled_wheel: Path) -> None:
    """No generator input (the protocol JSON specs live in tools/codegen) and no C
    source: besides modules, only the files something reads or a tool looks for."""
    names = [n for n in zipfile.ZipFile(compiled_wheel).namelist() if ".dist-info/" not in n]
    assert not [n for n in names if n.startswith("aiokproto/protocol/") and n.endswith(".json")]
    other = {n for n in names if not n.endswith(".py")}
    # the record codec, and the spark extra's Arrow builder beside the code that loads it
    so = {n for n in other if n.endswith(".so")}
    assert sorted(n.split(".")[0] for n in so) == ["aiokproto/_accel", "aiokproto/spark/_arrow"]
    assert other - so == {
        "aiokproto/py.typed",  # PEP 561: type checkers read the inline types
        "aiokproto/_accel.pyi",  # the compiled modules' types
        "aiokproto/spark/_arrow.pyi",
        # aiokproto.testing.jars resolves the broker's jars from these
        "aiokproto/testing/poms/kafka-4.4.0/pom.xml",
        "aiokproto/testing/poms/kafka-4.3.1/pom.xml",
        "aiokproto/testing/poms/kafka-3.9.1/pom.xml",
        # aiokproto.testing.schema_registry builds the test registry from these
        "aiokproto/testing/poms/apicurio-2.4.2/pom.xml",
        "aiokproto/testing/poms/apicurio-2.4.2/settings.xml",
        # aiokproto.testing.oidc builds the OAuth tests' identity provider from these
        "aiokproto/testing/poms/oidc-server/pom.xml",
        "aiokproto/testing/poms/oidc-server/OidcServer.java",
    }


def test_the_wheel_in_a_fresh_venv_runs_the_quickstart(
    compiled_wheel: Path, tmp_path: Path, kafka: KafkaService
) -> None:
    """pip install of the wheel alone (dependencies from the index, as a user gets
    them) into a venv that cannot see the checkout, then examples/quickstart.py."""
    venv = tmp_path / "venv"
    # no pip inside (seconds saved): the test's pip installs into it with --python
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
         "--disable-pip-version-check", str(compiled_wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "examples" / "quickstart.py", work)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIOKPROTO_", "PYTHON"))}
    env["KAFKA_BOOTSTRAP_SERVERS"] = kafka.bootstrap_servers
    where = subprocess.run(
        [str(python), "-c", "import aiokproto, aiokproto.accel as a; "
         "print(aiokproto.__file__, a.implementation())"],
        cwd=work, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert where == [str(venv / _site_packages(python) / "aiokproto" / "__init__.py"), "compiled"]
    run = subprocess.run(
        [str(python), "quickstart.py"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    # the session broker is shared: an earlier run of the quickstart (tests/examples,
    # the README's) left records in its topic, which the new group reads too
    assert run.stdout.count("produced to quickstart-events") == 10, run.stdout
    assert run.stdout.count("consumed quickstart-events") >= 10, run.stdout
    assert "committed" in run.stdout
    assert "compiled record codec" not in run.stderr


def _site_packages(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import sysconfig, sys; "
         "print(sysconfig.get_path('purelib').removeprefix(sys.prefix + '/'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


_TWO_CLIENTS = (
    "import asyncio\n"
    "from aiokproto import Consumer\n"
    "async def main():\n"
    "    Consumer('t', bootstrap_servers='127.0.0.1:1')\n"
    "    Consumer('t', bootstrap_servers='127.0.0.1:1')\n"
    "asyncio.run(main())\n"
)


def test_without_a_compiler_the_wheel_is_pure_python_and_works(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {**os.environ, "CC": "/bin/false"})
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    assert _implementation(wheel, tmp_path) == "python"
    # the first client says once that the codec is missing and what it costs ...
    notice = _run_from(tmp_path, _TWO_CLIENTS).stderr
    assert notice.count("runs without its compiled record codec") == 1, notice
    assert "No module named 'aiokproto._accel'" in notice and "2-3x" in notice
    assert "--no-cache-dir aiokproto" in notice and "AIOKPROTO_PURE_PYTHON=1" in notice
    # ... unless pure Python was chosen
    chosen = _run_from(tmp_path, _TWO_CLIENTS, AIOKPROTO_PURE_PYTHON="1").stderr
    assert "compiled record codec" not in chosen, chosen


def _run_from(tmp: Path, code: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``code`` on the wheel unpacked by _implementation() into tmp/site."""
    target = tmp / "site"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOKPROTO_")}
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env["PYTHONPATH"] = os.pathsep.join([str(target), *paths])
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={**env, **extra}, capture_output=True, text=True, check=True, cwd=target,
    )  # fmt: skip


async def test_a_missing_codec_is_logged_once_per_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(accel, "missing_reason", "No module named 'aiokproto._accel'")
    monkeypatch.setattr(accel, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="aiokproto.accel"):
        Consumer("t", bootstrap_servers="127.0.0.1:1")
        Consumer("t", bootstrap_servers="127.0.0.1:1")
    notices = [r for r in caplog.records if r.name == "aiokproto.accel"]
    assert len(notices) == 1 and notices[0].levelno == logging.WARNING
    assert "without its compiled record codec (No module named" in notices[0].getMessage()


def test_choosing_pure_python_is_not_a_missing_codec() -> None:
    code = "import aiokproto.accel as a; print(a.native, a.missing_reason)"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "AIOKPROTO_PURE_PYTHON": "1"},
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert out == ["None", "None"]
