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

import shutil
import subprocess
import zipfile
from importlib import resources
from pathlib import Path
from typing import Self

from aiokproto.testing import java_server, processes
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import _digest, default_cache_dir, tool_on_path
from aiokproto.testing.java_server import START_TIMEOUT_S, JavaServer, build_once, run_maven
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


def _project_file(name: str) -> str:
    path = resources.files("aiokproto.testing").joinpath("poms", _NAME, name)
    return path.read_text(encoding="utf-8")


def build_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / _NAME


def _run_jar(work: Path) -> Path:
    return work / "target" / "quarkus-app" / "quarkus-run.jar"


def _digest_now() -> str:
    return _digest(_project_file("pom.xml"), (), _project_file("settings.xml"))


def is_built(cache_dir: Path | None = None) -> bool:
    work = build_dir(cache_dir)
    return java_server.is_built(work, _digest_now(), _run_jar(work))


def build(cache_dir: Path | None = None) -> Path:
    """Build the registry into ``<cache>/apicurio-2.4.2`` once; return its run jar.

    Needs Maven and a JDK 17+ the first time (``KafkaHarnessError`` says which is
    missing); later calls return at once. Safe across processes (a file lock).
    """
    cache = cache_dir or default_cache_dir()
    work = build_dir(cache)
    pom, settings = _project_file("pom.xml"), _project_file("settings.xml")
    what = "the schema registry (Apicurio Registry) for the tests"
    build_once(
        cache,
        work,
        _digest(pom, (), settings),
        _run_jar(work),
        what,
        lambda mvn: _build(mvn, cache, work, pom, settings),
    )
    return _run_jar(work)


def _maven(mvn: str, cache: Path, work: Path, *goals: str) -> None:
    cmd = [mvn, "-q", "-B", "-f", str(work / "pom.xml"), "-s", str(work / "settings.xml")]
    cmd += [f"-Dmaven.repo.local={cache / 'm2'}", *goals]
    run_maven(cmd, "the schema registry", _BUILD_TIMEOUT_S)


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


class LocalSchemaRegistry(JavaServer):
    """One registry process on 127.0.0.1 (in-memory storage: a restart forgets all).

    ``url`` is the Confluent-compatible base URL to give ``SchemaRegistryClient``.
    ``stop()`` and ``start()`` may be called again (a test takes it away and brings
    it back on the same port).
    """

    what = "the schema registry"
    stop_grace_s = 15.0

    def __init__(self, cache_dir: Path | None = None, port: int | None = None) -> None:
        self._cache_dir = cache_dir
        self.port = port or free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"
        self.ready_url = f"{self.url}/subjects"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = build_dir(cache_dir) / f"registry-{self.port}.log"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        if self.running:
            return self
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
        self.wait_ready(timeout_s)
        return self


def registry_possible() -> str | None:
    """None if a registry can be built or is built here; else why not (a skip reason)."""
    if is_built():
        return None if tool_on_path("java") else "no 'java' on PATH for the schema registry"
    for tool in ("mvn", "java"):
        if tool_on_path(tool) is None:
            return f"no '{tool}' on PATH: the schema registry (Apicurio) cannot be built"
    return None
