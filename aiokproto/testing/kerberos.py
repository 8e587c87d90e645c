"""A throwaway MIT Kerberos realm for tests: ``LocalKdc`` creates the database,
principals and keytabs in a temporary directory and runs ``krb5kdc`` in the foreground
on a free loopback port; ``gssapi_broker_options`` gives a ``LocalKafka`` a GSSAPI
listener that logs in from a keytab.

Needs Debian's krb5-kdc, krb5-admin-server and krb5-user (``make krb5-deps``);
``kerberos_missing()`` says what is absent. The realm's ``krb5.conf`` turns off reverse
DNS and host name canonicalization, so ``localhost`` in a principal stays ``localhost``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

from aiokproto.testing import processes
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.lifecycle import BlockingService
from aiokproto.testing.ports import free_ports

REALM = "AIOKPROTO.TEST"
SERVICE_HOST = "localhost"
_SBIN = ("/usr/sbin", "/usr/local/sbin")
_TOOLS = {
    "krb5kdc": "krb5-kdc",
    "kdb5_util": "krb5-kdc",
    "kadmin.local": "krb5-admin-server",
    "kinit": "krb5-user",
}
#: runs a second KDC with its clock ahead (``LocalKdc.start_skewed``)
_FAKETIME = ("faketime", "faketime")
_START_TIMEOUT_S = 15.0
_TOOL_TIMEOUT_S = 30.0


def _which(tool: str) -> str | None:
    found = shutil.which(tool)
    if found:
        return found
    for folder in _SBIN:
        path = Path(folder) / tool
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def kerberos_missing() -> str | None:
    """Why a local KDC cannot run here (the missing commands and their Debian
    packages), or None when it can."""
    missing = sorted({pkg for tool, pkg in _TOOLS.items() if _which(tool) is None})
    if missing:
        return (
            f"MIT Kerberos is not installed ({' '.join(missing)} missing; "
            "make krb5-deps installs them as root)"
        )
    return None


def krb5_conf(realm: str, kdc_port: int, default_ccache: Path, timesync: bool = True) -> str:
    """The client-side krb5.conf of the realm (read by MIT's library and by Java);
    ``timesync=False`` turns off MIT's correction of the client's clock to the KDC's
    (kdc_timesync), so a skewed KDC is an error."""
    return f"""[libdefaults]
    default_realm = {realm}
    kdc_timesync = {int(timesync)}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    rdns = false
    dns_canonicalize_hostname = false
    udp_preference_limit = 1
    default_ccache_name = FILE:{default_ccache}
    forwardable = false

[realms]
    {realm} = {{
        kdc = 127.0.0.1:{kdc_port}
    }}

[domain_realm]
    localhost = {realm}
    127.0.0.1 = {realm}
"""


def kdc_conf(realm: str, kdc_port: int, directory: Path, max_life: str) -> str:
    return f"""[kdcdefaults]
    kdc_ports = {kdc_port}
    kdc_tcp_ports = {kdc_port}

[realms]
    {realm} = {{
        database_name = {directory / "principal"}
        key_stash_file = {directory / "stash"}
        acl_file = {directory / "kadm5.acl"}
        max_life = {max_life}
        max_renewable_life = {max_life}
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
        kdc_ports = {kdc_port}
        kdc_tcp_ports = {kdc_port}
    }}

[logging]
    kdc = FILE:{directory / "kdc.log"}
"""


class LocalKdc(BlockingService):
    """One realm (``REALM``) served by a foreground ``krb5kdc`` on 127.0.0.1.

    ``env`` holds ``KRB5_CONFIG`` (and the KDC's profile) for tools and clients;
    ``add_principal`` creates principals and writes their keys to keytabs;
    ``kinit`` fills a private ticket cache from a keytab.
    """

    def __init__(self, realm: str = REALM, max_life: str = "1h") -> None:
        self.realm = realm
        self.max_life = max_life
        self.port = 0
        self._directory: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._skewed: subprocess.Popen[bytes] | None = None

    @property
    def directory(self) -> Path:
        if self._directory is None:
            raise KafkaHarnessError("the KDC has not been started")
        return self._directory

    @property
    def krb5_conf(self) -> Path:
        return self.directory / "krb5.conf"

    @property
    def default_ccache(self) -> Path:
        """The ticket cache clients use when neither $KRB5CCNAME nor an option names one."""
        return self.directory / "ccache-default"

    @property
    def env(self) -> dict[str, str]:
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.directory / "kdc.conf"),
        }

    def start(self) -> Self:
        why_not = kerberos_missing()
        if why_not is not None:
            raise KafkaHarnessError(why_not)
        self._directory = Path(tempfile.mkdtemp(prefix="aiokproto-kdc-"))
        try:
            self.port = free_ports(1)[0]
            self.krb5_conf.write_text(
                krb5_conf(self.realm, self.port, self.default_ccache)
            )
            (self.directory / "kdc.conf").write_text(
                kdc_conf(self.realm, self.port, self.directory, self.max_life)
            )
            (self.directory / "kadm5.acl").write_text("")
            self._run("kdb5_util", "-r", self.realm, "create", "-s", "-P", "aiokproto-master")
            argv = [str(_which("krb5kdc")), "-n", "-r", self.realm]
            env = {**os.environ, **self.env}
            self._proc = processes.spawn(
                argv, self.directory, self.directory / "krb5kdc.out", env=env
            )
            self._wait_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            for proc in (self._proc, self._skewed):
                if proc is not None:
                    _stop_group(proc)
            self._proc = self._skewed = None
        finally:
            if self._directory is not None:
                shutil.rmtree(self._directory, ignore_errors=True)
                self._directory = None

    def start_skewed(self, offset: str = "+1 hour") -> Path:
        """A second KDC of the same realm and database whose clock is ``offset`` ahead
        (run under faketime); returns a krb5.conf that points clients at it, with MIT's
        clock correction off. Stopped with the KDC."""
        faketime = _which(_FAKETIME[0])
        if faketime is None:
            raise KafkaHarnessError(f"{_FAKETIME[0]} is not installed (Debian: {_FAKETIME[1]})")
        if self._skewed is not None:
            raise KafkaHarnessError("the skewed KDC is already running")
        port = free_ports(1)[0]
        profile = self.directory / "kdc-skewed.conf"
        profile.write_text(kdc_conf(self.realm, port, self.directory, self.max_life))
        conf = self.directory / "krb5-skewed.conf"
        conf.write_text(
            krb5_conf(self.realm, port, self.directory / "ccache-skewed", timesync=False)
        )
        env = {**os.environ, "KRB5_CONFIG": str(conf), "KRB5_KDC_PROFILE": str(profile)}
        argv = [faketime, offset, str(_which("krb5kdc")), "-n", "-r", self.realm]
        self._skewed = processes.spawn(
            argv, self.directory, self.directory / "krb5kdc-skewed.out", env=env
        )
        self._wait_listening(self._skewed, port)
        return conf

    def _wait_listening(self, proc: subprocess.Popen[bytes] | None = None, port: int = 0) -> None:
        proc = proc or self._proc
        port = port or self.port
        assert proc is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise KafkaHarnessError(f"krb5kdc exited with {proc.returncode}", self.log_tail())
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.02)
        raise KafkaHarnessError(
            f"krb5kdc did not listen on port {port} within {_START_TIMEOUT_S:.0f}s",
            self.log_tail(),
        )

    def log_tail(self, lines: int = 40) -> str:
        out: list[str] = []
        for name in ("krb5kdc.out", "krb5kdc-skewed.out", "kdc.log"):
            path = self.directory / name
            if path.exists():
                out += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)

    def as_requests(self, principal: str) -> int:
        """How many initial tickets (AS-REQ) the KDC has issued to ``principal``."""
        log = self.directory / "kdc.log"
        if not log.exists():
            return 0
        client = self.principal(principal)
        return sum(
            1
            for line in log.read_text(errors="replace").splitlines()
            if "AS_REQ" in line and "ISSUE" in line and f"{client} for" in line
        )

    def principal(self, name: str) -> str:
        """``name`` with the realm appended (``kafka/localhost`` -> ``kafka/localhost@R``)."""
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(
        self, name: str, keytab: Path | None = None, *, max_life: str | None = None
    ) -> str:
        """Create ``name`` with a random key (written to ``keytab`` when given); returns
        the full principal name."""
        full = self.principal(name)
        life = f' -maxlife "{max_life}" -maxrenewlife "{max_life}"' if max_life else ""
        commands = [f"addprinc -randkey{life} {full}"]
        if keytab is not None:
            commands.append(f"ktadd -k {keytab} {full}")
        for command in commands:
            self._run("kadmin.local", "-r", self.realm, "-q", command)
        return full

    def delete_principal(self, name: str) -> None:
        command = f"delprinc -force {self.principal(name)}"
        self._run("kadmin.local", "-r", self.realm, "-q", command)

    def kinit(
        self, principal: str, keytab: Path, ccache: Path, lifetime: str | None = None
    ) -> None:
        """Get a ticket for ``principal`` from ``keytab`` into the ``ccache`` file."""
        args = ["-kt", str(keytab), "-c", f"FILE:{ccache}"]
        if lifetime is not None:
            args += ["-l", lifetime]
        self._run("kinit", *args, self.principal(principal))

    def _run(self, tool: str, *args: str) -> str:
        path = _which(tool)
        if path is None:
            raise KafkaHarnessError(f"{tool} is not installed")
        try:
            done = subprocess.run(
                [path, *args],
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                timeout=_TOOL_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise KafkaHarnessError(f"{tool} {' '.join(args)} took over 30 s") from None
        if done.returncode != 0 or "error" in done.stderr.lower():
            raise KafkaHarnessError(
                f"{tool} {' '.join(args)} failed (exit {done.returncode})",
                (done.stdout + done.stderr).strip(),
            )
        return done.stdout


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop ``proc`` and what it started: faketime runs the skewed KDC as its child, in
    the process group that spawn() made for it (start_new_session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    processes.terminate(proc, 5.0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # a child that outlived its parent


def gssapi_broker_options(
    kdc: LocalKdc,
    keytab: Path,
    protocols: tuple[str, ...],
    service: str = "kafka",
) -> tuple[dict[str, str | None], list[str]]:
    """``LocalKafka`` overrides and JVM options for GSSAPI on ``protocols`` (its SASL
    listeners), the broker logging in as ``service/localhost`` from ``keytab``."""
    principal = kdc.principal(f"{service}/{SERVICE_HOST}")
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
        f'storeKey=true keyTab="{keytab}" principal="{principal}";'
    )
    overrides: dict[str, str | None] = {
        "sasl.enabled.mechanisms": "GSSAPI,PLAIN",
        "sasl.kerberos.service.name": service,
    }
    for proto in protocols:
        prefix = f"listener.name.{proto.lower()}.gssapi"
        overrides[f"{prefix}.sasl.jaas.config"] = jaas
    jvm = [f"-Djava.security.krb5.conf={kdc.krb5_conf}"]
    return overrides, jvm
