"""Kafka broker jars: resolved once from Maven Central into a project-local cache."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from aiokproto.testing.errors import KafkaHarnessError

DEFAULT_VERSION = "4.3.1"
SUPPORTED_VERSIONS: tuple[str, ...] = ("4.3.1", "3.9.1")

_MARKER = ".resolved.json"
_RESOLVE_TIMEOUT_S = 900.0
_LOCK_TIMEOUT_S = 960.0


def default_cache_dir() -> Path:
    """``$AIOKPROTO_CACHE_DIR`` if set, else ``<cwd>/.cache/aiokproto``."""
    env = os.environ.get("AIOKPROTO_CACHE_DIR")
    return Path(env) if env else Path.cwd() / ".cache" / "aiokproto"


def check_version(version: str) -> str:
    if version not in SUPPORTED_VERSIONS:
        raise KafkaHarnessError(
            f"unsupported Kafka version {version!r}; choose one of {', '.join(SUPPORTED_VERSIONS)}"
        )
    return version


def pom_text(version: str) -> str:
    check_version(version)
    pom = resources.files("aiokproto.testing").joinpath("poms", f"kafka-{version}", "pom.xml")
    return pom.read_text(encoding="utf-8")


def tool_on_path(name: str) -> str | None:
    return shutil.which(name)


def libs_dir(version: str, cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / f"kafka-{version}" / "libs"


def is_resolved(version: str, cache_dir: Path | None = None) -> bool:
    """True when the libs dir holds every jar of the last successful resolution of
    the current POM (a changed POM triggers a new resolution)."""
    libs = libs_dir(version, cache_dir)
    try:
        marker = json.loads((libs / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("pom_sha256") != _pom_digest(version):
        return False
    jars = marker.get("jars")
    return isinstance(jars, list) and bool(jars) and all((libs / str(j)).is_file() for j in jars)


def resolve_jars(version: str = DEFAULT_VERSION, cache_dir: Path | None = None) -> Path:
    """Make sure the broker classpath for ``version`` is in the cache; return the libs dir.

    Uses ``mvn dependency:copy-dependencies`` with a private local repository under the
    cache dir, so nothing outside the project directory is touched. Safe to call from
    several processes at once (a file lock serialises resolution).
    """
    check_version(version)
    cache = cache_dir or default_cache_dir()
    libs = libs_dir(version, cache)
    if is_resolved(version, cache):
        return libs
    mvn = tool_on_path("mvn")
    if mvn is None:
        raise KafkaHarnessError(
            "Maven ('mvn') is not on PATH; it is needed once to fetch the Kafka jars "
            "(install it, e.g. 'apt-get install maven')"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache / f"kafka-{version}.lock"):
        if is_resolved(version, cache):  # another process finished while we waited
            return libs
        _run_maven(mvn, version, cache, libs)
    return libs


def classpath(version: str, cache_dir: Path | None = None) -> str:
    """The ``-cp`` argument for ``java`` (a wildcard over the resolved libs dir)."""
    return str(resolve_jars(version, cache_dir) / "*")


def _pom_digest(version: str) -> str:
    return hashlib.sha256(pom_text(version).encode("utf-8")).hexdigest()


def _run_maven(mvn: str, version: str, cache: Path, libs: Path) -> None:
    work = cache / f"kafka-{version}"
    work.mkdir(parents=True, exist_ok=True)
    # Maven needs the POM as a real file; keep a copy beside the libs it produced.
    pom = work / "pom.xml"
    pom.write_text(pom_text(version), encoding="utf-8")
    if libs.exists():
        shutil.rmtree(libs)
    cmd = [
        mvn, "-q", "-B", "-f", str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={libs}",
        f"-Dmaven.repo.local={cache / 'm2'}",
    ]  # fmt: skip
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=_RESOLVE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise KafkaHarnessError(
            f"Maven did not finish resolving Kafka {version} within {_RESOLVE_TIMEOUT_S:.0f}s"
        ) from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise KafkaHarnessError(
            f"Maven failed to resolve Kafka {version} (exit {proc.returncode}): {tail}"
        )
    jars = sorted(p.name for p in libs.glob("*.jar"))
    if not any(j.startswith(f"kafka_2.13-{version}") for j in jars):
        raise KafkaHarnessError(f"Maven ran but {libs} has no kafka_2.13-{version} jar")
    marker = {"pom_sha256": _pom_digest(version), "jars": jars, "resolved_at": time.time()}
    (libs / _MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        deadline = time.monotonic() + _LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise KafkaHarnessError(
                        f"timed out waiting for the lock {path} (another resolution running?)"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
