"""A private network of Linux network namespaces: one "switch" namespace holding a
bridge, and one namespace per host (the brokers, the client) joined to it by a veth
pair, with an address in 10.77.0.0/24 that exists only inside these namespaces.

Faults are nftables rules in the switch namespace's bridge forward hook, so they act on
frames between two hosts and nothing else: ``cut(a, b)`` drops what ``a`` sends to
``b`` (one direction: call it twice, or use ``partition``, for both), optionally only
one TCP port (the controller listener); ``lossy(pct)`` drops that share of every frame
at random. ``delay(ms)`` uses ``tc netem`` in each host namespace when the kernel has it
(``netem_missing()`` says why not); ``throttle(host, kbit)`` makes a host's link slow
(``tc tbf``). The root namespace is never touched: no link, route
or rule is added there.

Namespaces are named ``akpnet-<pid>-<host>``: ``remove_stale()`` deletes those of a run
whose process is gone (and the processes still inside them), so a crashed run's leftovers
never pile up; ``Network.close()`` removes this run's, also after a failure.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence

PREFIX = "akpnet-"
SUBNET = "10.77.0"
_CMD_TIMEOUT_S = 10.0
_TABLE = "akp"
_CHAIN = "cuts"


class NetnsError(RuntimeError):
    """An ip/nft/tc command failed (its stderr is in the message)."""


def run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=_CMD_TIMEOUT_S, check=False
    )
    if check and proc.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


@functools.cache
def unsupported() -> str | None:
    """Why this machine cannot run the suite, or None when it can."""
    if os.geteuid() != 0:
        return "needs root (CAP_NET_ADMIN) to create network namespaces"
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"'{tool}' is not installed (Debian package {package}: make netns-deps)"
    probe = f"{PREFIX}{os.getpid()}-probe"  # a crashed probe is stale like the rest
    try:
        made = run(["ip", "netns", "add", probe], check=False)
        if made.returncode != 0:
            return f"cannot create a network namespace: {made.stderr.strip()}"
        table = run(
            ["ip", "netns", "exec", probe, "nft", "add", "table", "bridge", _TABLE], check=False
        )
        if table.returncode != 0:
            return f"nftables bridge tables unavailable: {table.stderr.strip()}"
    finally:
        run(["ip", "netns", "delete", probe], check=False)
    return None


def _namespaces() -> list[str]:
    out = run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_inside(namespace: str) -> None:
    """SIGKILL the processes in one of our namespaces (ours: started by this suite)."""
    pids = run(["ip", "netns", "pids", namespace], check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def _delete(namespace: str) -> None:
    _kill_inside(namespace)
    run(["ip", "netns", "delete", namespace], check=False)


def remove_stale() -> list[str]:
    """Delete the namespaces of earlier runs whose process is gone; returns their names."""
    removed = []
    for name in _namespaces():
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not _pid_alive(int(owner)):
            _delete(name)
            removed.append(name)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Network:
    """The switch and its hosts; ``hosts`` maps a host name (``b1``, ``client``...) to
    its address. Use as a context manager: every namespace is removed on exit."""

    def __init__(self, hosts: Sequence[str]) -> None:
        self.prefix = f"{PREFIX}{os.getpid()}-"
        self.switch = f"{self.prefix}sw"
        self.hosts = {name: f"{SUBNET}.{i + 1}" for i, name in enumerate(hosts)}
        self.rules: list[str] = []  # what is cut now, for the timeline
        self.cuts_made = 0
        self._made: list[str] = []
        self._shaped: set[str] = set()

    def namespace(self, host: str) -> str:
        return f"{self.prefix}{host}"

    def exec_argv(self, host: str) -> list[str]:
        """The prefix that runs a command inside ``host``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def __enter__(self) -> Network:
        remove_stale()
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        self._add_namespace(self.switch)
        sw = ["ip", "-n", self.switch]
        run([*sw, "link", "add", "br0", "type", "bridge"])
        run([*sw, "link", "set", "br0", "up"])
        for index, (host, address) in enumerate(self.hosts.items()):
            ns = self.namespace(host)
            self._add_namespace(ns)
            port = f"p{index}"
            run([*sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
            run([*sw, "link", "set", port, "master", "br0"])
            run([*sw, "link", "set", port, "up"])
            run(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        nft = self._nft_argv()
        run([*nft, "add", "table", "bridge", _TABLE])
        run([*nft, "add", "chain", "bridge", _TABLE, _CHAIN,
             "{ type filter hook forward priority 0; policy accept; }"])  # fmt: skip

    def _add_namespace(self, name: str) -> None:
        run(["ip", "netns", "add", name])
        self._made.append(name)

    def _nft_argv(self) -> list[str]:
        return ["ip", "netns", "exec", self.switch, "nft"]

    def close(self) -> None:
        """Kill what runs inside, then delete every namespace (the veths go with them)."""
        for name in reversed(self._made):
            _delete(name)
        self._made.clear()

    # -- faults ------------------------------------------------------------------------

    def _rule(self, match: str, why: str) -> None:
        run([*self._nft_argv(), "add", "rule", "bridge", _TABLE, _CHAIN, *match.split(), "drop"])
        self.rules.append(why)

    def cut(self, src: str, dst: str, port: int | None = None) -> None:
        """Drop what ``src`` sends to ``dst`` (only TCP to or from ``port`` if given)."""
        match = f"ip saddr {self.hosts[src]} ip daddr {self.hosts[dst]}"
        if port is None:
            self._rule(match, f"{src}->{dst}")
        else:
            self._rule(f"{match} tcp dport {port}", f"{src}->{dst}:{port}")
            self._rule(f"{match} tcp sport {port}", f"{src}:{port}->{dst}")
        self.cuts_made += 1

    def partition(
        self,
        group: Sequence[str],
        others: Sequence[str],
        port: int | None = None,
        *,
        one_way: bool = False,
    ) -> None:
        """Cut every host of ``group`` from every one of ``others``: both directions, or
        only what ``group`` sends when ``one_way``."""
        for a in group:
            for b in others:
                self.cut(a, b, port)
                if not one_way:
                    self.cut(b, a, port)

    def lossy(self, percent: int) -> None:
        """Drop ``percent`` % of all frames between hosts, at random."""
        self._rule(f"numgen random mod 100 < {percent}", f"loss {percent}%")

    def heal(self) -> None:
        """Remove every cut and every loss rule (delays and throttles stay: unshape)."""
        run([*self._nft_argv(), "flush", "chain", "bridge", _TABLE, _CHAIN])
        self.rules.clear()

    def netem_missing(self) -> str | None:
        """Why ``delay`` cannot work here (the kernel lacks sch_netem), or None."""
        host = next(iter(self.hosts))
        dev = ["ip", "netns", "exec", self.namespace(host), "tc", "qdisc"]
        added = run([*dev, "add", "dev", "eth0", "root", "netem", "delay", "1ms"], check=False)
        if added.returncode != 0:
            return f"tc netem unavailable ({added.stderr.strip()}): kernel without sch_netem"
        run([*dev, "del", "dev", "eth0", "root"], check=False)
        return None

    def _qdisc(self, host: str, *spec: str) -> None:
        run(["ip", "netns", "exec", self.namespace(host), "tc", "qdisc", "replace",
             "dev", "eth0", "root", *spec])  # fmt: skip
        self._shaped.add(host)

    def delay(self, ms: int, jitter_ms: int = 0, hosts: Sequence[str] | None = None) -> None:
        """``tc netem`` delay on what ``hosts`` (default: all) send."""
        for host in hosts or list(self.hosts):
            self._qdisc(
                host, "netem", "delay", f"{ms}ms", *([f"{jitter_ms}ms"] if jitter_ms else [])
            )

    def throttle(self, host: str, kbit: int) -> None:
        """A slow link: what ``host`` sends leaves at ``kbit`` kbit/s (``tc tbf``;
        packets queued for over 2 s are dropped), so its answers lag behind."""
        self._qdisc(host, "tbf", "rate", f"{kbit}kbit", "burst", "16kb", "latency", "2000ms")

    def unshape(self) -> None:
        """Remove every delay and throttle."""
        for host in sorted(self._shaped):
            run(["ip", "netns", "exec", self.namespace(host), "tc", "qdisc", "del",
                 "dev", "eth0", "root"], check=False)  # fmt: skip
        self._shaped.clear()


def wait_until(predicate: object, timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll ``predicate()`` until true; NetnsError after ``timeout`` seconds."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise NetnsError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
