"""Spark option parsing, the kafka.* mapping and Spark's offset JSON, without Spark."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.errors import KafkaConfigError
from aiokproto.spark.kafka_options import OWN, client_options, parse_jaas_config
from aiokproto.spark.offsets import (
    AtTimestamp,
    ByTimestamp,
    Earliest,
    Latest,
    Specific,
    assignment_from_json,
    offsets_from_json,
    offsets_to_json,
)
from aiokproto.spark.options import (
    Assign,
    Subscribe,
    SubscribePattern,
    parse_sink_options,
    parse_source_options,
)
from aiokproto.structs import TopicPartition as TP

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def source(**kw: str) -> dict[str, str]:
    # Spark hands options over with lower-cased keys.
    return {k.lower(): v for k, v in {**BOOT, **kw}.items()}


# -- offsets JSON ------------------------------------------------------------------------


def test_offsets_json_round_trip() -> None:
    text = '{"b": {"1": 5, "0": -2}, "a": {"10": -1}}'
    parsed = offsets_from_json(text, "startingOffsets")
    assert parsed == {TP("b", 1): 5, TP("b", 0): -2, TP("a", 10): -1}
    assert offsets_to_json(parsed) == {"a": {"10": -1}, "b": {"0": -2, "1": 5}}
    assert list(offsets_to_json(parsed)) == ["a", "b"]


@given(
    st.dictionaries(
        st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 1000)),
        st.integers(-2, 2**62),
        max_size=20,
    )
)
def test_offsets_json_round_trip_property(raw: dict[tuple[str, int], int]) -> None:
    offsets = {TP(t, p): o for (t, p), o in raw.items()}
    text = json.dumps(offsets_to_json(offsets))
    assert offsets_from_json(text, "x") == offsets


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "expected"),
        ('{"t": 5}', "must map to"),
        ('{"t": {"x": 5}}', "is not a number"),
        ('{"t": {"-1": 5}}', "negative"),
        ('{"t": {"0": "5"}}', "must be an integer"),
        ('{"t": {"0": true}}', "must be an integer"),
        ('{"": {"0": 1}}', "non-empty"),
    ],
)
def test_offsets_json_rejects(text: str, needle: str) -> None:
    with pytest.raises(KafkaConfigError, match=needle):
        offsets_from_json(text, "startingOffsets")


def test_assign_json() -> None:
    assert assignment_from_json('{"b": [1, 0], "a": [2]}') == (TP("a", 2), TP("b", 0), TP("b", 1))
    for bad in ('{"a": []}', "{}", '{"a": [-1]}', '{"a": "0"}', "[]"):
        with pytest.raises(KafkaConfigError, match="assign"):
            assignment_from_json(bad)


# -- source options ----------------------------------------------------------------------


def test_source_defaults() -> None:
    o = parse_source_options(source(subscribe="a, b,a"))
    assert o.subscription == Subscribe(("a", "b"))
    assert o.batch_starting == Earliest()
    assert o.stream_starting == Latest()
    assert o.ending == Latest()
    assert o.fail_on_data_loss is True
    assert o.include_headers is False
    assert o.max_offsets_per_trigger is None
    assert o.client == {"bootstrap_servers": "127.0.0.1:9092"}
    o.check_batch()
    o.check_streaming()


def test_exactly_one_subscription() -> None:
    with pytest.raises(KafkaConfigError, match="exactly one"):
        parse_source_options(source())
    with pytest.raises(KafkaConfigError, match="got subscribe, assign"):
        parse_source_options(source(subscribe="a", assign='{"a": [0]}'))
    p = parse_source_options(source(subscribePattern="ev.*")).subscription
    assert isinstance(p, SubscribePattern)
    assert p.matches("events") and not p.matches("xevents")
    with pytest.raises(KafkaConfigError, match="not a regex"):
        parse_source_options(source(subscribePattern="("))
    a = parse_source_options(source(assign='{"t": [1, 0]}')).subscription
    assert a == Assign((TP("t", 0), TP("t", 1)))


def test_bounds_and_precedence() -> None:
    o = parse_source_options(
        source(
            subscribe="t",
            startingOffsets='{"t": {"0": 7}}',
            startingOffsetsByTimestamp='{"t": {"0": 100}}',
            startingTimestamp="5",
            endingOffsets="latest",
        )
    )
    assert o.batch_starting == AtTimestamp(5)  # the single timestamp wins
    o = parse_source_options(
        source(
            subscribe="t",
            startingOffsets='{"t": {"0": 7}}',
            startingOffsetsByTimestamp='{"t": {"0": 100}}',
        )
    )
    assert o.batch_starting == ByTimestamp({TP("t", 0): 100})
    o = parse_source_options(source(subscribe="t", startingOffsets='{"t": {"0": 7, "1": -2}}'))
    assert o.batch_starting == Specific({TP("t", 0): 7, TP("t", 1): -2})
    assert o.stream_starting == o.batch_starting


def test_batch_and_streaming_rules() -> None:
    with pytest.raises(KafkaConfigError, match="cannot be latest"):
        parse_source_options(source(subscribe="t", startingOffsets="latest")).check_batch()
    with pytest.raises(KafkaConfigError, match="cannot be latest"):
        parse_source_options(
            source(subscribe="t", startingOffsets='{"t": {"0": -1}}')
        ).check_batch()
    with pytest.raises(KafkaConfigError, match="cannot be earliest"):
        parse_source_options(source(subscribe="t", endingOffsets="earliest")).check_batch()
    with pytest.raises(KafkaConfigError, match="batch queries only"):
        parse_source_options(source(subscribe="t", endingOffsets="latest")).check_streaming()
    with pytest.raises(KafkaConfigError, match="invalid"):
        parse_source_options(source(subscribe="t", startingOffsets='{"t": {"0": -3}}'))


def test_assign_offsets_must_be_assigned() -> None:
    with pytest.raises(KafkaConfigError, match="not assigned"):
        parse_source_options(source(assign='{"t": [0]}', startingOffsets='{"t": {"0": 1, "1": 1}}'))


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("maxOffsetsPerTrigger", "0", "positive"),
        ("maxOffsetsPerTrigger", "many", "positive"),
        ("minPartitions", "-1", "positive"),
        ("failOnDataLoss", "yes", "true or false"),
        ("includeHeaders", "1", "true or false"),
        ("startingTimestamp", "-5", ">= 0"),
        ("startingTimestamp", "now", "milliseconds"),
        ("startingOffsetsByTimestampStrategy", "skip", "error or latest"),
        ("startingOfsets", "earliest", "unknown option"),
    ],
)
def test_source_option_errors(key: str, value: str, needle: str) -> None:
    with pytest.raises(KafkaConfigError, match=needle):
        parse_source_options(source(subscribe="t", **{key: value}))


def test_spark_injected_keys_are_tolerated() -> None:
    parse_source_options(source(subscribe="t", path="", checkpointLocation="/tmp/x"))


# -- kafka.* ---------------------------------------------------------------------------


def test_kafka_options_are_mapped_and_typed() -> None:
    out = client_options(
        {
            "kafka.bootstrap.servers": "h:1,h:2",
            "kafka.client.id": "spark",
            "kafka.request.timeout.ms": "5000",
            "kafka.security.protocol": "sasl_plaintext",
            "kafka.sasl.mechanism": "scram-sha-256",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="p a\\"ss";',
            "kafka.isolation.level": "read_committed",
            "kafka.check.crcs": "false",
            "kafka.max.partition.fetch.bytes": "4194304",
            "subscribe": "ignored-here",
        },
        "consumer",
    )
    assert out == {
        "bootstrap_servers": "h:1,h:2",
        "client_id": "spark",
        "request_timeout_ms": 5000,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 'p a"ss',
        "isolation_level": "read_committed",
        "check_crcs": False,
        "max_partition_fetch_bytes": 4194304,
    }


def test_kafka_kerberos_options() -> None:
    pytest.importorskip("gssapi")  # GSSAPI options are checked at construction
    out = client_options(
        {
            **BOOT,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "gssapi",
            "kafka.sasl.kerberos.service.name": "kafka",
            "kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useKeyTab=true keyTab="/k.keytab" principal="spark@EX.COM";',
        },
        "consumer",
    )
    assert out == {
        "bootstrap_servers": BOOT["kafka.bootstrap.servers"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
        "sasl_kerberos_keytab": "/k.keytab",
        "sasl_kerberos_principal": "spark@EX.COM",
    }
    with pytest.raises(KafkaConfigError, match=r"kafka\.sasl\.jaas\.config: Krb5LoginModule"):
        client_options(
            {**BOOT, "kafka.sasl.jaas.config": "x.Krb5LoginModule required bogus=1;"},
            "consumer",
        )
    jaas = 'x.Krb5LoginModule required useTicketCache=true serviceName="kafka2";'
    out = client_options({**BOOT, "kafka.sasl.jaas.config": jaas}, "consumer")
    assert out["sasl_kerberos_service_name"] == "kafka2"
    with pytest.raises(KafkaConfigError, match="serviceName=kafka2 differs"):
        client_options(
            {**BOOT, "kafka.sasl.jaas.config": jaas, "kafka.sasl.kerberos.service.name": "k"},
            "consumer",
        )


def test_kafka_pem_stores() -> None:
    out = client_options(
        {
            **BOOT,
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/ca.pem",
            "kafka.ssl.endpoint.identification.algorithm": "",
        },
        "consumer",
    )
    assert out["ssl_cafile"] == "/ca.pem" and out["ssl_check_hostname"] is False
    with pytest.raises(KafkaConfigError, match="PEM files only"):
        client_options({**BOOT, "kafka.ssl.truststore.location": "/ts.jks"}, "consumer")


@pytest.mark.parametrize(
    ("options", "role", "needle"),
    [
        ({}, "consumer", "bootstrap.servers is required"),
        ({**BOOT, "kafka.group.id": "g"}, "consumer", "without a consumer group"),
        ({**BOOT, "kafka.auto.offset.reset": "earliest"}, "consumer", "startingOffsets"),
        ({**BOOT, "kafka.value.serializer": "x"}, "producer", "not supported"),
        ({**BOOT, "kafka.fetch.max.bytez": "1"}, "consumer", "kafka.fetch.max.bytez"),
        ({**BOOT, "kafka.acks": "all"}, "consumer", "unknown Kafka option"),
        ({**BOOT, "kafka.linger.ms": "soon"}, "producer", "must be an integer"),
        ({**BOOT, "kafka.security.protocol": "TLS"}, "consumer", "security_protocol"),
        ({**BOOT, "kafka.security.protocol": "SASL_SSL"}, "consumer", "needs sasl_plain"),
        ({**BOOT, "kafka.isolation.level": "dirty"}, "consumer", "read_committed"),
    ],
)
def test_kafka_option_errors(options: dict[str, str], role: str, needle: str) -> None:
    with pytest.raises(KafkaConfigError, match=needle):
        client_options(options, role)  # type: ignore[arg-type]


def test_producer_options() -> None:
    out = client_options(
        {**BOOT, "kafka.acks": "all", "kafka.linger.ms": "20", "kafka.compression.type": "zstd"},
        "producer",
    )
    assert out == {
        "bootstrap_servers": "127.0.0.1:9092",
        "acks": "all",
        "linger_ms": 20,
        "compression_type": "zstd",
    }
    assert client_options({**BOOT, "kafka.acks": "1"}, "producer")["acks"] == 1


def test_role_options_exist_in_the_clients() -> None:
    from aiokproto.consumer.consumer_config import CONSUMER_OPTIONS
    from aiokproto.producer.options import PRODUCER_OPTIONS

    assert set(OWN["consumer"]) <= CONSUMER_OPTIONS
    assert set(OWN["producer"]) <= PRODUCER_OPTIONS


def test_jaas_forms() -> None:
    assert parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        "username='u' password=secret;"
    ) == ("u", "secret")
    # parse_jaas_config reads username/password forms; client_options sends an
    # OAuthBearerLoginModule line to the OAuth login instead (tests/unit/oauth)
    with pytest.raises(KafkaConfigError, match="OAuthBearerLoginModule with clientId"):
        parse_jaas_config("com.example.OtherLoginModule required;")
    with pytest.raises(KafkaConfigError, match="needs username"):
        parse_jaas_config('PlainLoginModule required username="u";')


def test_sink_options() -> None:
    o = parse_sink_options({**BOOT, "topic": " out "})
    assert o.topic == "out"
    assert parse_sink_options(BOOT).topic is None
    with pytest.raises(KafkaConfigError, match="unknown option"):
        parse_sink_options({**BOOT, "subscribe": "x"})
    with pytest.raises(KafkaConfigError, match="empty"):
        parse_sink_options({**BOOT, "topic": " "})


def test_sink_batches_in_bulk_unless_told_otherwise() -> None:
    """The sink's producer batches 256 KB by default (the producer's is 16 KB), never
    above max.request.size; kafka.batch.size wins."""
    assert parse_sink_options(BOOT).client["batch_size"] == 262_144
    small = parse_sink_options({**BOOT, "kafka.max.request.size": "100000"})
    assert small.client["batch_size"] == 100_000
    given = parse_sink_options({**BOOT, "kafka.batch.size": "16384"})
    assert given.client["batch_size"] == 16_384
