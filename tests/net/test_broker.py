"""Connections against the real Apache Kafka broker: pipelining, versions, TLS, SASL."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokproto.admin import Admin, NewTopic
from aiokproto.consumer import Consumer
from aiokproto.errors import KafkaAuthenticationError, KafkaConnectionError
from aiokproto.producer import Producer
from aiokproto.protocol.messages import API_NAMES, request_class
from aiokproto.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from aiokproto.structs import ConsumerGroupMetadata, TopicPartition
from aiokproto.testing import LocalKafka, api_versions
from tests.clients import client_for
from tests.faults.proxy import FaultProxy

# The APIs whose negotiated version must be the 4.x broker's maximum (issue 4).
HOT_APIS = {
    0: "Produce",
    1: "Fetch",
    3: "Metadata",
    2: "ListOffsets",
    8: "OffsetCommit",
    9: "OffsetFetch",
    11: "JoinGroup",
    14: "SyncGroup",
    12: "Heartbeat",
}


async def test_concurrent_requests_pipeline_on_one_connection(kafka: Any) -> None:
    async with client_for(kafka.bootstrap_servers, allow_auto_create_topics=False) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        names = [f"pipelined-{i}" for i in range(40)]
        tasks = [
            asyncio.ensure_future(
                conn.send(
                    MetadataRequest(
                        topics=[MetadataRequestTopic(name=n)], allow_auto_topic_creation=False
                    )
                )
            )
            for n in names
        ]
        peak = 0
        while not all(t.done() for t in tasks):
            peak = max(peak, conn.in_flight)
            await asyncio.sleep(0)
        responses = await asyncio.gather(*tasks)
        # each caller got the answer to its own question
        assert [r.topics[0].name for r in responses] == names
        assert peak > 1
        assert peak <= client.config.max_in_flight_requests_per_connection
        assert await client.connection(node) is conn


async def test_negotiated_versions_are_the_brokers_maxima(kafka_any: Any) -> None:
    async with client_for(kafka_any.bootstrap_servers) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        for key in HOT_APIS:
            cls = request_class(key)
            broker_max = conn.api_versions[key][1]
            assert conn.version_for(cls) == min(broker_max, cls.MAX_STABLE_VERSION)
            if kafka_any.version.startswith("4."):
                assert conn.version_for(cls) == broker_max, HOT_APIS[key]


# Versions the client keeps below the broker's on purpose: AddPartitionsToTxn v4+ is
# broker to broker; without transactions v2 (Kafka 3.9) EndTxn and TxnOffsetCommit stay
# at their v1-protocol maxima (aiokproto/producer/transactions.py).
_CLIENT_CAPS = {24: 3}
_TV1_CAPS = {26: 4, 28: 4}


async def test_every_api_used_goes_out_at_the_newest_stable_version(
    kafka_any: Any, topic_name: str
) -> None:
    """Off the wire (request headers seen by a proxy): a producer's transaction with
    offsets, classic and KIP-848 consumer groups and admin calls send every API at
    the highest version both sides support; against a 4.x broker that is the broker's
    own maximum, and against 4.4.0 also the newest version the 4.4.0 specs call stable.
    """
    host, port = kafka_any.bootstrap_servers.split(",")[0].rsplit(":", 1)
    broker = api_versions(host, int(port))
    newest = kafka_any.version.startswith("4.")
    fast: dict[str, Any] = {"retry_backoff_ms": 50, "default_api_timeout_ms": 20_000}
    groups = [f"{topic_name}-classic"] + ([f"{topic_name}-848"] if newest else [])
    async with FaultProxy(kafka_any.bootstrap_servers) as proxy:
        boot = proxy.bootstrap_servers
        async with Admin(bootstrap_servers=boot, **fast) as admin:
            await admin.create_topics([NewTopic(topic_name, 1, 1)])
        txn_id = f"tx-{uuid.uuid4().hex[:10]}"
        async with Producer(bootstrap_servers=boot, transactional_id=txn_id, **fast) as producer:
            await producer.begin_transaction()
            await producer.send_and_wait(topic_name, b"record")
            # offsets of the topic it writes: its metadata knows the id (TxnOffsetCommit v6)
            await producer.send_offsets_to_transaction(
                {TopicPartition(topic_name, 0): 0}, ConsumerGroupMetadata(f"{topic_name}-txn")
            )
            await producer.commit_transaction()
        for group in groups:
            protocol = "consumer" if group.endswith("-848") else "classic"
            async with Consumer(
                topic_name,
                bootstrap_servers=boot,
                group_id=group,
                group_protocol=protocol,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                isolation_level="read_committed",
                **fast,
            ) as consumer:
                record = await asyncio.wait_for(consumer.getone(), 30)
                assert record.value == b"record"
                await consumer.commit()
        async with Admin(bootstrap_servers=boot, **fast) as admin:
            assert set(await admin.describe_consumer_groups(groups)) == set(groups)
            await admin.delete_consumer_groups(groups)
        sent: dict[int, set[int]] = {}
        for listener in proxy.listeners:
            for (key, version), _ in listener.stats.requests.items():
                sent.setdefault(key, set()).add(version)
    proxy.check()
    # what this workload must have exercised (the APIs of every version it runs on)
    must = {0, 1, 2, 3, 8, 9, 10, 11, 13, 14, 15, 18, 19, 22, 26, 28, 42}
    assert must <= set(sent), sorted(API_NAMES[k] for k in must - set(sent))
    if newest:
        assert {68} <= set(sent)  # ConsumerGroupHeartbeat
    wrong = {}
    for key, versions in sent.items():
        cls = request_class(key)
        want = min(broker[key][1], cls.MAX_STABLE_VERSION, _CLIENT_CAPS.get(key, 99))
        if not newest:
            want = min(want, _TV1_CAPS.get(key, 99))
        elif key not in _CLIENT_CAPS:
            # a 4.x broker never advertises more than the 4.4.0 specs call stable
            assert broker[key][1] <= cls.MAX_STABLE_VERSION, API_NAMES[key]
            if kafka_any.version == "4.4.0":
                assert broker[key][1] == cls.MAX_STABLE_VERSION, API_NAMES[key]
        if key == 18 and want < cls.MAX_STABLE_VERSION:
            # ApiVersions opens at the client's newest; an older broker answers
            # UNSUPPORTED_VERSION with its range, and the client asks again at its max
            versions = versions - {cls.MAX_STABLE_VERSION}
        if versions != {want}:
            wrong[API_NAMES[key]] = (sorted(versions), want)
    assert not wrong, wrong


async def test_an_array_over_the_brokers_cap_fails_here_not_on_the_socket(
    kafka: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka 4.4 closes the connection on an array of more than 1,000,000 elements:
    the client refuses to encode one (ValueError) and the connection stays usable; with
    the client's check lifted, the 4.4.0 broker drops the connection, which is why it
    is there. About 1 s (two 4 MB requests)."""
    from aiokproto.protocol import primitives
    from aiokproto.protocol.messages import offset_fetch as of

    def too_big() -> of.OffsetFetchRequest:
        topic = of.OffsetFetchRequestTopics(
            name="t", partition_indexes=list(range(1_000_001))
        )
        return of.OffsetFetchRequest(
            groups=[of.OffsetFetchRequestGroup(group_id="g", topics=[topic])]
        )

    async with client_for(kafka.bootstrap_servers) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        with pytest.raises(ValueError, match="more than 1,000,000 elements; split"):
            await conn.send(too_big(), 8)  # v8: names, not ids (any topic will do)
        assert (await conn.send(MetadataRequest(topics=[]))).brokers
        if kafka.version.startswith("3.") or kafka.version == "4.3.1":
            return  # older brokers have no such cap
        monkeypatch.setattr(primitives, "MAX_ARRAY_ELEMENTS", 2_000_000)
        with pytest.raises(KafkaConnectionError):
            await conn.send(too_big(), 8)


async def test_metadata_decodes_on_each_version(kafka_any: Any, topic_name: str) -> None:
    async with client_for(kafka_any.bootstrap_servers) as client:
        client.metadata.track([topic_name])
        snap = await client.metadata.wait_for(lambda s: s.leader_for(topic_name, 0) is not None, 30)
        info = snap.topics[topic_name]
        assert info.topic_id.int != 0
        assert snap.cluster_id
        assert snap.brokers[info.partitions[0].leader].port > 0


def _user(kafka: LocalKafka) -> tuple[str, str]:
    user = kafka.users[0]
    return user.username, user.password


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_accepts_right_and_rejects_wrong_credentials(
    kafka_secure: LocalKafka, protocol: str, mechanism: str
) -> None:
    username, password = _user(kafka_secure)
    tls = {"ssl_cafile": str(kafka_secure.ca_file)} if protocol == "SASL_SSL" else {}
    common = {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": username,
        **tls,
    }
    async with client_for(
        kafka_secure.bootstrap(protocol), sasl_plain_password=password, **common
    ) as client:
        assert client.metadata.snapshot.brokers
    bad = client_for(
        kafka_secure.bootstrap(protocol),
        sasl_plain_password="wrong-password",
        default_api_timeout_ms=5000,
        **common,
    )
    with pytest.raises(KafkaAuthenticationError, match=mechanism):
        async with bad:
            pass


async def test_tls_verifies_the_broker_certificate(kafka_secure: LocalKafka) -> None:
    bootstrap = kafka_secure.bootstrap("SSL")
    async with client_for(
        bootstrap, security_protocol="SSL", ssl_cafile=str(kafka_secure.ca_file)
    ) as client:
        assert client.metadata.snapshot.cluster_id
    # The system trust store does not know the test CA: the handshake must fail.
    untrusted = client_for(bootstrap, security_protocol="SSL", default_api_timeout_ms=3000)
    with pytest.raises(KafkaAuthenticationError, match="TLS handshake"):
        async with untrusted:
            pass


def unsecured_jwt(subject: str) -> str:
    """An unsigned JWT ("alg": "none") that Kafka's unsecured validator accepts."""
    import base64
    import json
    import time

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + 3600})}."


async def test_oauthbearer_with_an_async_token_provider(kafka_secure: LocalKafka) -> None:
    calls = []

    async def token() -> str:
        calls.append(1)
        return unsecured_jwt("alice")

    async with client_for(
        kafka_secure.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=token,
    ) as client:
        assert client.metadata.snapshot.brokers
    assert calls

    async def expired() -> str:
        return "not-a-jwt"

    bad = client_for(
        kafka_secure.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=expired,
        default_api_timeout_ms=5000,
    )
    with pytest.raises(KafkaAuthenticationError, match="OAUTHBEARER"):
        async with bad:
            pass


async def test_sasl_session_is_reauthenticated_before_it_expires(kafka_secure: LocalKafka) -> None:
    from aiokproto.testing.broker_config import REAUTH_TEST_SESSION_MS

    username, password = _user(kafka_secure)
    async with client_for(
        kafka_secure.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=username,
        sasl_plain_password=password,
    ) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conn = await client.connection(node)
        first_deadline = conn._reauth_at
        assert first_deadline is not None  # the broker announced a session lifetime
        for _ in range(3):  # outlive the 3 s session twice over on one connection
            await asyncio.sleep(REAUTH_TEST_SESSION_MS / 1000 * 0.8)
            await conn.send(MetadataRequest(topics=[]))
        assert conn.connected
        assert await client.connection(node) is conn
        assert conn._reauth_at is not None and conn._reauth_at > first_deadline


async def test_each_purpose_gets_its_own_connection(kafka: Any) -> None:
    async with client_for(kafka.bootstrap_servers) as client:
        node = next(iter(client.metadata.snapshot.brokers))
        conns = {
            p: await client.connection(node, p) for p in ("default", "produce", "fetch", "group")
        }
        assert len({id(c) for c in conns.values()}) == 4
        # a long-poll fetch on the fetch connection does not hold up the group connection
        long_poll = asyncio.ensure_future(
            conns["fetch"].send(MetadataRequest(topics=[]), timeout_ms=10_000)
        )
        await conns["group"].send(MetadataRequest(topics=[]))
        await long_poll


async def test_bootstrap_skips_a_dead_server(kafka: Any) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    async with client_for(
        f"127.0.0.1:{dead},{kafka.bootstrap_servers}", reconnect_backoff_max_ms=100
    ) as client:
        assert client.metadata.snapshot.brokers


async def test_recreated_topic_never_keeps_the_old_topic_id(kafka: Any, topic_name: str) -> None:
    from aiokproto import Admin, AdminBatchError, NewTopic

    async with Admin(bootstrap_servers=kafka.bootstrap_servers) as admin:
        await admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])
        async with client_for(kafka.bootstrap_servers, allow_auto_create_topics=False) as client:
            client.metadata.track([topic_name])
            snap = await client.metadata.wait_for(lambda s: topic_name in s.topics, 30)
            old_id = snap.topics[topic_name].topic_id
            await admin.delete_topics([topic_name])
            for _ in range(100):  # deletion completes asynchronously on the broker
                try:
                    await admin.create_topics(
                        [NewTopic(topic_name, num_partitions=1, replication_factor=1)]
                    )
                    break
                except AdminBatchError:  # still being deleted: TopicAlreadyExists
                    await asyncio.sleep(0.1)
            snap = await client.metadata.wait_for(
                lambda s: topic_name in s.topics and s.topics[topic_name].topic_id != old_id, 30
            )
            assert snap.partitions_for(topic_name) == (0,)
