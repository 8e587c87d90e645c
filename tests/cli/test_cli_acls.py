"""``aiokproto acls`` end to end: a subprocess against a broker with KRaft's
StandardAuthorizer (started once for this module), and one without an authorizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from aiokproto.testing import LocalKafka
from aiokproto.testing.broker_config import PLAINTEXT_ONLY
from aiokproto.testing.discovery import KafkaService, external_bootstrap, local_jars_possible

ENV = {k: v for k, v in os.environ.items() if not k.startswith("AIOKPROTO_")}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiokproto", *args], capture_output=True,
                          text=True, timeout=60, env=ENV)


def ok(*args: str) -> Any:
    proc = cli(*args, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def failed(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stderr


@pytest.fixture(scope="module")
def acl_kafka(kafka_version: str) -> Iterator[LocalKafka]:
    """A single node with StandardAuthorizer; ANONYMOUS (PLAINTEXT) is a super user, so
    the controller and the command may do everything (as tests/admin's fixture)."""
    if external_bootstrap() is not None or not local_jars_possible(kafka_version):
        pytest.skip("the authorizer broker is started locally only")
    broker = LocalKafka(
        version=kafka_version,
        security=PLAINTEXT_ONLY,
        overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    ).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def bs(acl_kafka: LocalKafka) -> list[str]:
    return ["--bootstrap-server", acl_kafka.bootstrap_servers, "--timeout", "20"]


def acl(rtype: str, name: str, pattern: str, principal: str, op: str, perm: str = "ALLOW",
        host: str = "*") -> dict[str, str]:
    return {"resource_type": rtype, "resource_name": name, "pattern_type": pattern,
            "principal": principal, "host": host, "operation": op, "permission_type": perm}


def test_acls_create_list_delete(bs: list[str]) -> None:
    topic, team = f"orders-{uuid.uuid4().hex[:8]}", f"team-{uuid.uuid4().hex[:8]}-"
    alice, bob = f"User:alice-{topic}", f"User:bob-{topic}"
    # one ACL per principal x operation, as kafka-acls adds them; Kafka's spellings
    created = ok("acls", "create", "--topic", topic, "--principal", alice, "--principal", bob,
                 "--operation", "Read", "--operation", "describe", *bs)["created"]
    assert len(created) == 4
    assert acl("TOPIC", topic, "LITERAL", alice, "READ") in created
    ok("acls", "create", "--resource-type", "Group", "--resource-name", team,
       "--resource-pattern-type", "PREFIXED", "--principal", bob, "--operation", "All",
       "--permission", "deny", *bs)
    ok("acls", "create", "--cluster", "--principal", alice, "--operation", "idempotent-write",
       "--host", "10.0.0.1", *bs)

    everything = ok("acls", "list", *bs)  # visible at once: create waits for the authorizer
    mine = [a for a in everything if a["principal"] in (alice, bob)]
    assert len(mine) == 6
    assert acl("GROUP", team, "PREFIXED", bob, "ALL", "DENY") in mine
    assert acl("CLUSTER", "kafka-cluster", "LITERAL", alice, "IDEMPOTENT_WRITE",
               host="10.0.0.1") in mine
    assert ok("acls", "list", "--principal", alice, "--operation", "READ", *bs) == [
        acl("TOPIC", topic, "LITERAL", alice, "READ")
    ]
    # MATCH: the ACLs that apply to a group named team-x (the prefixed one)
    assert ok("acls", "list", "--group", team + "x", "--pattern-type", "match", *bs) == [
        acl("GROUP", team, "PREFIXED", bob, "ALL", "DENY")
    ]
    table = cli("acls", "list", "--topic", topic, *bs)
    assert table.returncode == 0, table.stderr
    assert "4 ACLs" in table.stdout
    assert all(x in table.stdout for x in (topic, alice, bob, "Describe", "Allow"))

    deleted = ok("acls", "delete", "--topic", topic, "--operation", "Describe", *bs)["deleted"]
    assert sorted(a["principal"] for a in deleted) == [alice, bob]
    assert {a["operation"] for a in ok("acls", "list", "--topic", topic, *bs)} == {"READ"}
    assert ok("acls", "delete", "--topic", "no-such-" + topic, *bs) == {"deleted": []}
    for principal in (alice, bob):
        ok("acls", "delete", "--principal", principal, *bs)
    assert not [a for a in ok("acls", "list", *bs) if a["principal"] in (alice, bob)]


def test_acls_bad_options_exit_2(bs: list[str]) -> None:
    assert "use one of" in failed(cli("acls", "list", "--operation", "Reed", *bs), 2)
    assert "--principal is required" in failed(
        cli("acls", "create", "--topic", "t", "--operation", "Read", *bs), 2)
    assert "Type:name" in failed(
        cli("acls", "create", "--topic", "t", "--principal", "alice", "--operation", "Read",
            *bs), 2)
    assert "not both" in failed(
        cli("acls", "list", "--topic", "t", "--resource-type", "group", *bs), 2)
    # a binding names a pattern; only filters match Any/Match
    assert "use one of" in failed(
        cli("acls", "create", "--topic", "t", "--pattern-type", "any", "--principal",
            "User:a", "--operation", "Read", *bs), 2)
    assert "delete every ACL" in failed(cli("acls", "delete", *bs), 2)


def test_acls_without_authorizer(kafka: KafkaService) -> None:
    bs = ["-b", kafka.bootstrap_servers, "--timeout", "20"]
    began = time.monotonic()
    for args in (["acls", "list"],
                 ["acls", "create", "--topic", "t", "--principal", "User:a", "--operation",
                  "Read"],
                 ["acls", "delete", "--principal", "User:a"]):
        message = failed(cli(*args, *bs), 1)
        assert len(message.strip().splitlines()) == 1, message
        assert "no authorizer (SecurityDisabledError)" in message, message
    assert time.monotonic() - began < 30
