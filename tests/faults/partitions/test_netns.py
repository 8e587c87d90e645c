"""The namespaces, cuts and heals themselves, without Kafka (about 3 s): a cut stops
exactly the direction it names, a port cut leaves other ports alone, heal restores
everything, and nothing of the network outlives the test (nor a crashed run's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.faults.partitions import netns

REASON = netns.unsupported()
needs_netns = pytest.mark.skipif(REASON is not None, reason=REASON or "")

SERVER = """
import socket, sys
socks = []
for port in (7001, 7002):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], port)); s.listen(16); socks.append(s)
print("up", flush=True)
import selectors
sel = selectors.DefaultSelector()
for s in socks: sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        conn, _ = key.fileobj.accept(); conn.sendall(b"hi"); conn.close()
"""

CLIENT = """
import socket, sys
s = socket.socket(); s.settimeout(0.7)
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); print(s.recv(2).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


def talk(net: netns.Network, src: str, dst: str, port: int = 7001) -> str:
    out = subprocess.run(
        [*net.exec_argv(src), sys.executable, "-c", CLIENT, net.hosts[dst], str(port)],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    return out.stdout.strip()


@needs_netns
def test_cuts_are_directional_and_heal() -> None:
    with netns.Network(["a", "b"]) as net:
        server = subprocess.Popen(
            [*net.exec_argv("b"), sys.executable, "-c", SERVER, net.hosts["b"]],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "up"
            assert talk(net, "a", "b") == "hi"
            net.cut("a", "b")
            assert talk(net, "a", "b") == "TimeoutError"  # SYN dropped
            net.heal()
            net.cut("b", "a")  # asymmetric: a's SYN arrives, b's answer does not
            assert talk(net, "a", "b") == "TimeoutError"
            net.heal()
            net.cut("a", "b", port=7002)
            assert (talk(net, "a", "b", 7001), talk(net, "a", "b", 7002)) == ("hi", "TimeoutError")
            assert net.rules == ["a->b:7002", "a:7002->b"]
            net.heal()
            assert talk(net, "a", "b", 7002) == "hi"
            names = {net.namespace(h) for h in net.hosts} | {net.switch}
        finally:
            server.kill()
            server.wait(timeout=10)
    assert not names & set(netns._namespaces())  # all gone, the server's included


@needs_netns
def test_a_crashed_runs_namespaces_are_removed_first() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait(timeout=10)
    stale = f"{netns.PREFIX}{dead.pid}-x"
    mine = f"{netns.PREFIX}{os.getpid()}-keep"
    netns.run(["ip", "netns", "add", stale])
    netns.run(["ip", "netns", "add", mine])
    try:
        removed = netns.remove_stale()
        left = set(netns._namespaces())
        assert stale in removed and stale not in left
        assert mine in left  # a live run's namespaces are its own business
    finally:
        netns.run(["ip", "netns", "delete", mine], check=False)
        netns.run(["ip", "netns", "delete", stale], check=False)


def test_the_skip_reason_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    check = netns.unsupported.__wrapped__  # not the cached answer
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert check() == "needs root (CAP_NET_ADMIN) to create network namespaces"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: None)
    assert check() == "'ip' is not installed (Debian package iproute2: make netns-deps)"
