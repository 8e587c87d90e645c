"""The committed generated files are what the generator produces."""

from __future__ import annotations

import re

from aiokproto.protocol.messages import API_NAMES
from tools.codegen.__main__ import ROOT, SPECS, check, generate
from tools.codegen.spec import INTER_BROKER, client_messages, load_merged


def test_codegen_check_passes() -> None:
    problems = check(generate())
    assert problems == [], "\n".join(problems)


def test_output_is_deterministic() -> None:
    assert generate() == generate()


def test_only_the_apis_a_client_sends_are_generated() -> None:
    specs = load_merged(SPECS)
    kept = {s.name for s in client_messages(specs)}
    for spec in (s for s in specs if s.kind == "request"):
        generated = spec.name in kept
        assert (spec.name.replace("Request", "Response") in kept) == generated, spec.name
        assert generated == ("broker" in spec.listeners and spec.name[:-7] not in INTER_BROKER)
    # KRaft controller RPCs, ZooKeeper-era and broker-to-broker APIs are left out
    for name in (
        "Vote",
        "BrokerRegistration",
        "LeaderAndIsr",
        "ControlledShutdown",
        "Envelope",
        "WriteTxnMarkers",
        "ReadShareGroupState",
    ):
        assert f"{name}Request" not in kept and name not in API_NAMES.values()
    # the client's own APIs, and the admin APIs served by brokers and controllers alike
    for name in ("Produce", "Fetch", "ApiVersions", "ShareFetch", "CreateTopics", "DescribeQuorum"):
        assert name in API_NAMES.values()
    assert {s.name for s in specs if s.kind in ("data", "header")} & kept == {
        "ConsumerProtocolAssignment",
        "ConsumerProtocolSubscription",
        "RequestHeader",
        "ResponseHeader",
    }


_USES = re.compile(
    r"protocol\.messages\.(\w+)|protocol\.messages import (\w+) as|message_module\(\"(\w+)\"\)"
)


def test_every_message_module_the_library_uses_is_generated() -> None:
    used = set()
    for path in (ROOT / "aiokproto").rglob("*.py"):
        if "messages" not in path.parts:
            for match in _USES.finditer(path.read_text(encoding="utf-8")):
                used.add(next(g for g in match.groups() if g))
    assert len(used) > 40  # the pattern still finds the imports
    generated = {p.stem for p in (ROOT / "aiokproto" / "protocol" / "messages").glob("*.py")}
    assert used <= generated, sorted(used - generated)
