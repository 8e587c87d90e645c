"""A local Confluent-compatible schema registry for tests: Apicurio Registry 2.4.2.Final,
built once from Maven Central into the user cache dir and run on a free 127.0.0.1 port.

Why Apicurio 2.4.2: Confluent's own registry is not on Maven Central, Karapace is not on
PyPI, Apicurio 3.x needs Java 21. 2.4.2 runs on Java 17 with in-memory storage and serves
the Confluent API under ``/apis/ccompat/v7``. Building it needs three fixes to what
Central serves, all in ``poms/apicurio-2.4.2`` and below: every repository mirrored to
Central (settings.xml), one JitPack-only artifact swapped and one version pinned
(pom.xml), and the app jar's own ``application.properties`` plus Jandex index entries
for the Apicurio jars (they ship without an index: Quarkus would find none of their
beans). First build ~4 minutes (~216 MB of jars), start ~7 s.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from importlib import resources
from pathlib import Path
from types import TracebackType

from aiokproto.testing import processes
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import _digest, _file_lock, default_cache_dir, tool_on_path
from aiokproto.testing.ports import free_ports

VERSION = "2.4.2"
#: the path of the Confluent-compatible API on the server
CCOMPAT_PATH = "/apis/ccompat/v7"

_NAME = f"apicurio-{VERSION}"
_APP = "apicurio-registry-app"
_APP_COORDS = f"io.apicurio:{_APP}:{VERSION}.Final"
# Apicurio jars whose CDI beans Quarkus must index (they carry no Jandex index)
_INDEXED = (
    _APP,
    "apicurio-common-app-components-config",
    "apicurio-registry-schema-util-provider",
    "apicurio-registry-utils-import-export",
    "apicurio-registry-utils-kafka",
)
_BUILD_TIMEOUT_S = 1200.0
_START_TIMEOUT_S = 90.0
_MARKER = ".built.json"


def _project_file(name: str) -> str:
    path = resources.files("aiokproto.testing").joinpath("poms", _NAME, name)
    return path.read_text(encoding="utf-8")


def build_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / _NAME


def _run_jar(work: Path) -> Path:
    return work / "target" / "quarkus-app" / "quarkus-run.jar"


def is_built(cache_dir: Path | None = None) -> bool:
    work = build_dir(cache_dir)
    return _built_marker_ok(
        work, _digest(_project_file("pom.xml"), (), _project_file("settings.xml"))
    )


def _built_marker_ok(work: Path, digest: str) -> bool:
    try:
        marker = json.loads((work / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("digest") == digest and _run_jar(work).is_file()


def build(cache_dir: Path | None = None) -> Path:
    """Build the registry into ``<cache>/apicurio-2.4.2`` once; return its run jar.

    Needs Maven and a JDK 17+ the first time (``KafkaHarnessError`` says which is
    missing); later calls return at once. Safe across processes (a file lock).
    """
    cache = cache_dir or default_cache_dir()
    work = build_dir(cache)
    pom, settings = _project_file("pom.xml"), _project_file("settings.xml")
    digest = _digest(pom, (), settings)
    if _built_marker_ok(work, digest):
        return _run_jar(work)
    mvn = tool_on_path("mvn")
    if mvn is None:
        raise KafkaHarnessError(
            "Maven ('mvn') is not on PATH; it is needed once to build the schema registry "
            "(Apicurio Registry) for the tests (install it, e.g. 'apt-get install maven')"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache / f"{_NAME}.lock"):
        if not _built_marker_ok(work, digest):
            _build(mvn, cache, work, pom, settings)
            (work / _MARKER).write_text(
                json.dumps({"digest": digest, "built_at": time.time()}), encoding="utf-8"
            )
    return _run_jar(work)


def _maven(mvn: str, cache: Path, work: Path, *goals: str) -> None:
    cmd = [mvn, "-q", "-B", "-f", str(work / "pom.xml"), "-s", str(work / "settings.xml")]
    cmd += [f"-Dmaven.repo.local={cache / 'm2'}", *goals]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise KafkaHarnessError(
            f"Maven did not build the schema registry within {_BUILD_TIMEOUT_S:.0f}s"
        ) from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise KafkaHarnessError(
            f"Maven failed to build the schema registry (exit {proc.returncode}): {tail}"
        )


def _build(mvn: str, cache: Path, work: Path, pom: str, settings: str) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / "pom.xml").write_text(pom, encoding="utf-8")
    (work / "settings.xml").write_text(settings, encoding="utf-8")
    # the app jar carries its build-time configuration: it becomes the build's own
    app_dir = work / "app-jar"
    _maven(
        mvn,
        cache,
        work,
        "dependency:copy",
        f"-Dartifact={_APP_COORDS}",
        f"-DoutputDirectory={app_dir}",
    )
    jars = list(app_dir.glob(f"{_APP}-*.jar"))
    if not jars:
        raise KafkaHarnessError(f"Maven ran but {app_dir} has no {_APP} jar")
    with zipfile.ZipFile(jars[0]) as z:
        props = z.read("application.properties").decode("utf-8")
    extra = ["", "# added by aiokproto.testing.schema_registry"]
    for artifact in _INDEXED:
        # Quarkus 2.16 needs both keys
        extra.append(f"quarkus.index-dependency.{artifact}.group-id=io.apicurio")
        extra.append(f"quarkus.index-dependency.{artifact}.artifact-id={artifact}")
    # one directory to run from, instead of the app jar's legacy-jar (a jar per library)
    extra += ["quarkus.package.type=fast-jar", "%prod.quarkus.package.type=fast-jar", ""]
    resources_dir = work / "src" / "main" / "resources"
    resources_dir.mkdir(parents=True)
    (resources_dir / "application.properties").write_text(
        props + "\n".join(extra), encoding="utf-8"
    )
    _maven(mvn, cache, work, "package", "-DskipTests")
    if not _run_jar(work).is_file():
        raise KafkaHarnessError(f"Maven ran but {_run_jar(work)} was not built")


class LocalSchemaRegistry:
    """One registry process on 127.0.0.1 (in-memory storage: a restart forgets all).

    ``url`` is the Confluent-compatible base URL to give ``SchemaRegistryClient``.
    ``stop()`` and ``start()`` may be called again (a test takes it away and brings
    it back on the same port).
    """

    def __init__(self, cache_dir: Path | None = None, port: int | None = None) -> None:
        self._cache_dir = cache_dir
        self.port = port or free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = build_dir(cache_dir) / f"registry-{self.port}.log"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = _START_TIMEOUT_S) -> None:
        if self.running:
            return
        jar = build(self._cache_dir)
        java = tool_on_path("java")
        if java is None:
            raise KafkaHarnessError("'java' (17 or newer) is not on PATH: the registry needs it")
        cmd = [
            java,
            # small and quick to start: a test registry holds a few schemas
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.port}",
            "-jar",
            str(jar),
        ]
        self._log.write_bytes(b"")  # this run's log only
        # spawn(): reaped at exit, and killed by the kernel if this process dies
        # abruptly (a bare Popen outlived a killed pytest, holding ~200 MB and its port)
        self._proc = processes.spawn(cmd, jar.parent, self._log)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise KafkaHarnessError(
                    f"the schema registry exited ({self._proc.returncode}) at start: "
                    f"{self._log_tail()}"
                )
            if self._answers():
                return
            time.sleep(0.2)
        self.stop()
        raise KafkaHarnessError(
            f"the schema registry did not answer within {timeout_s:.0f}s: {self._log_tail()}"
        )

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=1.0) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _log_tail(self) -> str:
        try:
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        processes.terminate(proc, grace=15)

    def __enter__(self) -> LocalSchemaRegistry:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def registry_possible() -> str | None:
    """None if a registry can be built or is built here; else why not (a skip reason)."""
    if is_built():
        return None if tool_on_path("java") else "no 'java' on PATH for the schema registry"
    for tool in ("mvn", "java"):
        if tool_on_path(tool) is None:
            return f"no '{tool}' on PATH: the schema registry (Apicurio) cannot be built"
    return None
