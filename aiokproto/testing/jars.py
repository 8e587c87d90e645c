"""Kafka broker jars: resolved once from Maven Central into the user's cache directory."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from aiokproto.testing.errors import KafkaHarnessError

DEFAULT_VERSION = "4.4.0"
SUPPORTED_VERSIONS: tuple[str, ...] = ("4.4.0", "4.3.1", "3.9.1")

_MARKER = ".resolved.json"
_RESOLVE_TIMEOUT_S = 900.0
_LOCK_TIMEOUT_S = 960.0


def default_cache_dir() -> Path:
    """Where jars and the CLI broker's data live: ``$AIOKPROTO_CACHE_DIR`` if set, else
    the user cache directory (``$XDG_CACHE_HOME/aiokproto`` or ``~/.cache/aiokproto``;
    ``~/Library/Caches/aiokproto`` on macOS).

    Per user, not per directory: one download serves every project and checkout on the
    machine, and survives between test runs there (a fresh clone on CI included).
    """
    env = os.environ.get("AIOKPROTO_CACHE_DIR")
    if env:
        return Path(env)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "aiokproto"
    xdg = os.environ.get("XDG_CACHE_HOME")
    # the XDG spec: a relative path is invalid and must be ignored
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "aiokproto"
    return Path.home() / ".cache" / "aiokproto"


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
    return _marker_jars(libs_dir(version, cache_dir), _digest(pom_text(version))) is not None


def resolve_jars(version: str = DEFAULT_VERSION, cache_dir: Path | None = None) -> Path:
    """Make sure the broker classpath for ``version`` is in the cache; return the libs dir."""
    check_version(version)
    return resolve_pom(
        f"kafka-{version}",
        pom_text(version),
        cache_dir,
        expect=f"kafka_2.13-{version}",
        what=f"Kafka {version}",
    )


def classpath(version: str, cache_dir: Path | None = None) -> str:
    """The ``-cp`` argument for ``java`` (a wildcard over the resolved libs dir)."""
    return str(resolve_jars(version, cache_dir) / "*")


def resolve_pom(
    name: str,
    pom: str,
    cache_dir: Path | None = None,
    *,
    expect: str,
    what: str,
    maven_args: Sequence[str] = (),
    settings: str | None = None,
) -> Path:
    """Resolve the dependencies of the POM text ``pom`` into ``<cache>/<name>/libs``, once.

    Uses ``mvn dependency:copy-dependencies`` with a private local repository under the
    cache dir (shared by every POM, so common jars download once), so nothing outside
    the cache dir is touched (not the user's ``~/.m2``). A marker records the jars of
    the last success and a digest of the POM, arguments and settings; a change resolves
    again. Safe to call from several processes at once (a file lock serialises
    resolution). ``expect`` is the file-name prefix of a jar that must be among the
    results.
    """
    cache = cache_dir or default_cache_dir()
    libs = cache / name / "libs"
    digest = _digest(pom, maven_args, settings)
    if _marker_jars(libs, digest) is not None:
        return libs
    mvn = tool_on_path("mvn")
    if mvn is None:
        raise KafkaHarnessError(
            f"Maven ('mvn') is not on PATH; it is needed once to fetch the jars of {what} "
            "(install it, e.g. 'apt-get install maven')"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache / f"{name}.lock"):
        if _marker_jars(libs, digest) is None:  # another process may have finished
            _run_maven(mvn, cache, libs, pom, maven_args, settings, what)
            jars = sorted(p.name for p in libs.glob("*.jar"))
            if not any(j.startswith(expect) for j in jars):
                raise KafkaHarnessError(f"Maven ran but {libs} has no {expect} jar")
            marker = {"pom_sha256": digest, "jars": jars, "resolved_at": time.time()}
            (libs / _MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")
    return libs


def _digest(pom: str, maven_args: Sequence[str] = (), settings: str | None = None) -> str:
    text = "\0".join([pom, *maven_args, settings or ""])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _marker_jars(libs: Path, digest: str) -> list[str] | None:
    try:
        marker = json.loads((libs / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("pom_sha256") != digest:
        return None
    jars = marker.get("jars")
    if isinstance(jars, list) and jars and all((libs / str(j)).is_file() for j in jars):
        return [str(j) for j in jars]
    return None


def _run_maven(
    mvn: str,
    cache: Path,
    libs: Path,
    pom: str,
    maven_args: Sequence[str],
    settings: str | None,
    what: str,
) -> None:
    work = libs.parent
    work.mkdir(parents=True, exist_ok=True)
    # Maven needs the POM as a real file; keep a copy beside the libs it produced.
    (work / "pom.xml").write_text(pom, encoding="utf-8")
    cmd = [mvn, "-q", "-B", "-f", str(work / "pom.xml")]
    if settings is not None:
        (work / "settings.xml").write_text(settings, encoding="utf-8")
        cmd += ["-s", str(work / "settings.xml")]
    if libs.exists():
        shutil.rmtree(libs)
    cmd += [
        "dependency:copy-dependencies",
        f"-DoutputDirectory={libs}",
        f"-Dmaven.repo.local={cache / 'm2'}",
        *maven_args,
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=_RESOLVE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise KafkaHarnessError(
            f"Maven did not finish resolving {what} within {_RESOLVE_TIMEOUT_S:.0f}s"
        ) from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise KafkaHarnessError(f"Maven failed to resolve {what} (exit {proc.returncode}): {tail}")


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
