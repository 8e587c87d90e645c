"""Every client option, typed and documented in one place: each a ``TypedDict`` key with
its docstring (meaning, then ``Default:``, the value and its unit), what the
constructors take as ``**options: Unpack[...]``, and the source of
docs/reference/config.md.

The clients' constructors take their options as ``**options: Unpack[...]`` of these
TypedDicts, so editors complete and document each option and a type checker rejects an
unknown name or a wrong type; ``docs/reference/config.md`` is generated from this file
(``python -m tools.config_doc``; tests/test_config_doc.py fails when it is stale or an
option has no doc). The checks at run time (``KafkaConfigError`` with the closest valid
name) stay for callers that are not type-checked.

Each option's docstring ends with ``Default: ``<value>`` [unit].`` (or ``Required.``):
the generator reads it, and a test compares it with the default the client applies.

aiokafka's spellings (``max_batch_size``, ``api_version``, ``loop``, None for "the
default"...) are accepted at run time only (see ``aiokproto.config``): a type checker
points a migrating program at the name used here.

Imports for annotations only: this module must stay cheap to import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict

if TYPE_CHECKING:
    import ssl

    from aiokproto.consumer.group.assignors.base import Assignor
    from aiokproto.net.sasl import TokenProvider
    from aiokproto.structs import TopicPartition

__all__ = [
    "AdminOptions",
    "ClientOptions",
    "ConsumerOptions",
    "DeserializerOptions",
    "GroupOptions",
    "ProducerOptions",
    "SerializerOptions",
    "ShareConsumerOptions",
]


class ClientOptions(TypedDict, total=False):
    """The options every client takes (``Producer``, ``Consumer``, ``ShareConsumer``,
    ``Admin``)."""

    bootstrap_servers: Required[str | Iterable[str]]
    """Brokers to ask for the cluster's metadata first: ``"host:port,host:port"`` or a
    list of ``"host:port"`` (``[::1]:9092`` for IPv6; the port defaults to 9092). Any
    one of them that answers is enough. Required."""

    client_id: str
    """The name brokers log and quota this client under. Default: ``"aiokproto"``."""

    request_timeout_ms: int
    """How long one request may wait for its broker's answer before it fails (and is
    retried when the operation allows). Default: ``30000`` ms."""

    default_api_timeout_ms: int
    """The time limit of calls that take ``timeout_ms`` and were given none (admin
    calls, commits, offset lookups). Default: ``60000`` ms."""

    socket_connection_setup_timeout_ms: int
    """How long opening one connection (the TCP connect and the TLS handshake) may
    take. Default: ``10000`` ms."""

    bootstrap_timeout_ms: int
    """How long ``start()`` keeps trying while no bootstrap server has answered at all
    (every address refuses, times out or does not resolve) before it raises
    ``BootstrapError``; raise it for services that start before their brokers. Once any
    server answered, ``default_api_timeout_ms`` applies, which also bounds this one
    (raise both to wait longer than it). Default: ``5000`` ms."""

    connections_max_idle_ms: int
    """A connection unused for this long is closed. Default: ``540000`` ms."""

    max_in_flight_requests_per_connection: int
    """Requests sent on one connection before their answers came back; more than 5 turns
    the producer's idempotence off (or is an error when it was asked for).
    Default: ``5``."""

    metadata_max_age_ms: int
    """The cluster's metadata is refreshed at least this often, even when nothing
    failed. Default: ``300000`` ms."""

    retry_backoff_ms: int
    """The first wait before a failed request is retried; it doubles (with jitter) up to
    ``retry_backoff_max_ms``. Default: ``100`` ms."""

    retry_backoff_max_ms: int
    """The longest wait between retries of a request. Default: ``1000`` ms."""

    reconnect_backoff_ms: int
    """The first wait before connecting again to a broker that refused or dropped a
    connection; it doubles up to ``reconnect_backoff_max_ms``. Default: ``50`` ms."""

    reconnect_backoff_max_ms: int
    """The longest wait between connection attempts to one broker.
    Default: ``1000`` ms."""

    allow_auto_create_topics: bool
    """Let a metadata request for a missing topic create it, when the brokers allow
    that (``auto.create.topics.enable``). ``Admin`` never does. Default: ``True``."""

    max_response_size: int
    """The largest answer accepted from a broker; a larger frame closes the connection
    as corrupt. Default: ``268435456`` bytes."""

    security_protocol: str
    """``"PLAINTEXT"``, ``"SSL"``, ``"SASL_PLAINTEXT"`` or ``"SASL_SSL"`` (a ``str``,
    not a ``Literal``: deployments usually read it from their environment).
    Default: ``"PLAINTEXT"``."""

    ssl_context: ssl.SSLContext | None
    """A ready TLS context (``aiokproto.helpers.create_ssl_context`` makes one); when
    given, the ``ssl_cafile``/``ssl_certfile``/``ssl_keyfile`` options are not used.
    Default: ``None``."""

    ssl_cafile: str | None
    """PEM file of the certificate authorities to trust instead of the system's.
    Default: ``None``."""

    ssl_certfile: str | None
    """PEM file of this client's certificate, for brokers that authenticate clients by
    TLS. Default: ``None``."""

    ssl_keyfile: str | None
    """PEM file of the private key of ``ssl_certfile``. Default: ``None``."""

    ssl_password: str | None
    """Password of an encrypted ``ssl_keyfile``. Default: ``None``."""

    ssl_check_hostname: bool
    """Check that a broker's certificate names the host connected to.
    Default: ``True``."""

    sasl_mechanism: str
    """``"PLAIN"``, ``"SCRAM-SHA-256"``, ``"SCRAM-SHA-512"``, ``"OAUTHBEARER"`` or
    ``"GSSAPI"`` (Kerberos: ``pip install "aiokproto[gssapi]"``), with a ``SASL_*``
    security protocol. Default: ``"PLAIN"``."""

    sasl_plain_username: str | None
    """User name for PLAIN and SCRAM. Default: ``None``."""

    sasl_plain_password: str | None
    """Password for PLAIN and SCRAM (never shown in ``repr``). Default: ``None``."""

    sasl_oauth_token_provider: TokenProvider | None
    """For OAUTHBEARER: an async function returning a fresh token, or an object with an
    async ``token()`` method (aiokafka's ``AbstractTokenProvider``).
    Default: ``None``."""

    sasl_kerberos_service_name: str
    """For GSSAPI: the first part of the brokers' Kerberos principal (``kafka`` for
    ``kafka/host@REALM``; Java's ``sasl.kerberos.service.name``). Default: ``"kafka"``."""

    sasl_kerberos_domain_name: str | None
    """For GSSAPI: the host part of the brokers' principal, when it is not the host
    the client connects to (a load balancer, an IP address). Default: ``None``."""

    sasl_kerberos_keytab: str | None
    """For GSSAPI: a keytab to log in from (tickets are got and renewed from it, into
    a memory cache of the process) instead of a ticket cache filled by ``kinit``.
    Default: ``None``."""

    sasl_kerberos_principal: str | None
    """For GSSAPI: the client's principal (``user@REALM``) to take from the keytab or
    ticket cache; without it, the keytab's first or the cache's default principal.
    Default: ``None``."""

    sasl_kerberos_ccache: str | None
    """For GSSAPI: the ticket cache (``FILE:/path``, ``KEYRING:...``) instead of the
    default one (``$KRB5CCNAME``). Default: ``None``."""

    metrics_sample_window_ms: int
    """The window of each sample behind rates and averages in ``metrics()``.
    Default: ``30000`` ms."""

    metrics_num_samples: int
    """Samples kept per metric; rates cover this many windows. Default: ``2``."""

    enable_metrics_push: bool
    """Push client metrics to brokers that have a client-metrics subscription
    (KIP-714). Default: ``True``."""


AdminOptions = ClientOptions
"""``Admin`` takes only the shared options."""


class SerializerOptions(TypedDict, total=False):
    """How the producer turns keys and values into bytes (explicit parameters of
    ``Producer``, so that a type checker learns the types ``send()`` takes)."""

    key_serializer: Callable[[Any], bytes | None] | None
    """Turns each key that is not None into bytes; without it keys must be ``bytes``,
    ``bytearray`` or ``memoryview``. Default: ``None``."""

    value_serializer: Callable[[Any], bytes | None] | None
    """Turns each value that is not None into bytes; without it values must be
    ``bytes``, ``bytearray`` or ``memoryview``. Default: ``None``."""


class ProducerOptions(ClientOptions, total=False):
    """``Producer``'s options; ``key_serializer`` and ``value_serializer`` are keyword
    parameters of their own (``SerializerOptions`` documents them)."""

    acks: Literal[0, 1, -1, "all", "0", "1", "-1"]
    """Which replicas must have a batch before it counts as delivered: ``0`` none (no
    answer is awaited), ``1`` the leader, ``"all"`` (or ``-1``) every in-sync replica.
    Default: ``"all"``."""

    enable_idempotence: bool
    """Write each record exactly once per partition despite retries (producer id and
    sequence numbers). Left at its default, settings it cannot work with (``acks`` 0 or
    1, ``retries=0``, more than 5 requests in flight) turn it off; set to ``True``, they
    are an error. Default: ``True``."""

    batch_size: int
    """The most record bytes one partition's batch collects before it is sent. The
    batch's buffer grows with its records, so a big size costs no memory up front.
    Java's default is 16384; this is librdkafka's, lowered to ``max_request_size`` when
    that is lower. Default: ``1000000`` bytes."""

    linger_ms: int
    """How long a batch that is not full waits for more records before it is sent
    (``0``: at once). Default: ``5`` ms."""

    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"]
    """How batches are compressed. Default: ``"none"``."""

    compression_level: int | None
    """The codec's level, on the codec's own scale; ``None`` is the codec's default
    (gzip 6, lz4 0, zstd 3; snappy has none). Default: ``None``."""

    max_request_size: int
    """The largest produce request, and so the largest record.
    Default: ``1048576`` bytes."""

    buffer_memory: int
    """Bytes of records buffered and not yet delivered; ``send()`` waits (at most
    ``max_block_ms``) while it is full. Default: ``33554432`` bytes."""

    max_block_ms: int
    """How long ``send()`` may wait for buffer space before it raises
    ``KafkaTimeoutError``, and how long a record sent to a topic whose metadata is not
    known yet waits for it before its handle fails with ``KafkaTimeoutError``; also
    bounds the transaction calls. Default: ``60000`` ms."""

    delivery_timeout_ms: int
    """Time from ``send()`` until a record's delivery is reported, retries included; at
    least ``linger_ms + request_timeout_ms``. Default: ``120000`` ms."""

    retries: int
    """How often a failed batch is sent again within ``delivery_timeout_ms``; ``0``
    turns retries (and default idempotence) off. Default: ``2147483647``."""

    partitioner: Callable[[bytes | None, Sequence[int], Sequence[int]], int] | None
    """``partitioner(key_bytes, all_partitions, available_partitions)`` returns the
    partition of a record sent without one; ``None`` hashes the key (murmur2, as Java)
    or, without a key, fills one partition's batch at a time. Default: ``None``."""

    transactional_id: str | None
    """Makes the producer transactional (``begin_transaction()`` ...): the id fences off
    an older producer with the same id. Default: ``None``."""

    transaction_timeout_ms: int
    """How long the coordinator lets a transaction stay open before it aborts it.
    Default: ``60000`` ms."""

    metadata_max_idle_ms: int
    """A topic not sent to for this long is dropped from the producer's metadata (at
    least 5000). Default: ``300000`` ms."""


class DeserializerOptions(TypedDict, total=False):
    """How consumed keys and values are turned from bytes into objects (explicit
    parameters of ``Consumer`` and ``ShareConsumer``, so that a type checker learns the
    type of ``record.key`` and ``record.value``)."""

    key_deserializer: Callable[[bytes | None], Any] | None
    """Called with each record's key (``bytes``, or ``None`` when it has none); its
    result is ``record.key``. Default: ``None``."""

    value_deserializer: Callable[[bytes | None], Any] | None
    """Called with each record's value (``bytes``, or ``None`` for a tombstone); its
    result is ``record.value``. Default: ``None``."""


class GroupOptions(TypedDict, total=False):
    """``Consumer``'s options that apply with a ``group_id``."""

    group_instance_id: str | None
    """A static member id (KIP-345): a member that restarts with the same id within
    ``session_timeout_ms`` gets its partitions back without a rebalance.
    Default: ``None``."""

    session_timeout_ms: int
    """A member not heard from for this long is removed from the group (classic
    protocol). Default: ``45000`` ms."""

    heartbeat_interval_ms: int
    """How often the member tells the coordinator it is alive (classic protocol; below
    ``session_timeout_ms``, a third of it is usual). Default: ``3000`` ms."""

    max_poll_interval_ms: int
    """The longest time between two reads (``getone()``, ``getmany()``, iteration)
    before the member leaves the group so another takes its partitions.
    Default: ``300000`` ms."""

    rebalance_timeout_ms: int | None
    """How long the coordinator waits for members to rejoin during a rebalance;
    ``None`` is ``max_poll_interval_ms``. Default: ``None``."""

    enable_auto_commit: bool
    """Commit the positions of records handed out, in the background and when
    partitions are revoked or the consumer stops. Default: ``True``."""

    auto_commit_interval_ms: int
    """How often the automatic commit runs. Default: ``5000`` ms."""

    partition_assignment_strategy: (
        str | Sequence[str | Assignor | type[Assignor]] | Sequence[object]
    )
    """The assignors the member offers, preferred first: names (``"range"``,
    ``"roundrobin"``, ``"sticky"``, ``"cooperative-sticky"``), ``Assignor`` objects or
    classes, or aiokafka's assignor classes (classic protocol).
    Default: ``("range", "cooperative-sticky")``."""

    exclude_internal_topics: bool
    """A pattern subscription never matches internal topics such as
    ``__consumer_offsets``. Default: ``True``."""

    group_protocol: Literal["classic", "consumer"]
    """``"classic"`` (JoinGroup/SyncGroup, assignors run in the client) or
    ``"consumer"`` (KIP-848: the broker assigns, Kafka 4.0 and later).
    Default: ``"classic"``."""

    group_remote_assignor: str | None
    """With ``group_protocol="consumer"``: the broker-side assignor to use
    (``"uniform"``, ``"range"``); ``None`` is the broker's default.
    Default: ``None``."""


class ConsumerOptions(ClientOptions, GroupOptions, total=False):
    """``Consumer``'s options; ``key_deserializer`` and ``value_deserializer`` are
    keyword parameters of their own (``DeserializerOptions`` documents them)."""

    group_id: str | None
    """The consumer group to join; ``None`` reads without a group (no commits, and a
    subscription means every partition of its topics). Default: ``None``."""

    auto_offset_reset: Literal["earliest", "latest", "none"]
    """Where to start in a partition with no committed offset, or whose offset is out
    of range: the first record, the end, or raise ``OffsetOutOfRangeError``.
    Default: ``"latest"``."""

    fetch_min_bytes: int
    """A fetch answer waits (at most ``fetch_max_wait_ms``) until this much data is
    there. Default: ``1`` bytes."""

    fetch_max_wait_ms: int
    """How long a broker holds a fetch for ``fetch_min_bytes`` to arrive.
    Default: ``500`` ms."""

    fetch_max_bytes: int
    """The most data one fetch answer carries (a first record larger than it still
    comes). Default: ``52428800`` bytes."""

    max_partition_fetch_bytes: int
    """The most data one fetch answer carries per partition.
    Default: ``1048576`` bytes."""

    fetch_buffer_max_bytes: int
    """The most fetched data the consumer holds, across all brokers and partitions:
    buffered and not yet handed out, plus what the fetches in flight asked for. At
    the bound no fetch is sent until ``getmany()`` hands some out (a single batch
    larger than it still comes); paused partitions' data is then dropped, to be
    fetched again on ``resume()``. librdkafka's ``queued.max.messages.kbytes`` (in
    bytes here); Java bounds each answer only. Default: ``67108864`` bytes."""

    max_poll_records: int
    """The most records one ``getmany()`` returns. Default: ``500``."""

    isolation_level: Literal["read_uncommitted", "read_committed"]
    """``"read_committed"`` hands out transactional records only once committed, and
    never aborted ones. Default: ``"read_uncommitted"``."""

    check_crcs: bool
    """Check each batch's CRC32C. Default: ``True``."""

    enable_auto_offset_store: bool
    """``False``: commits without explicit offsets (auto-commit, the commit before a
    revoke or on ``stop()``, ``commit()`` with no argument) commit only what
    ``store_offsets()`` stored, never positions: for processing that finishes out of
    order (confluent-kafka's ``enable.auto.offset.store``). Default: ``True``."""

    client_rack: str | None
    """This client's rack, to fetch from a replica in the same rack (KIP-392) and for
    rack-aware assignors. Default: ``None``."""


class ShareConsumerOptions(ClientOptions, total=False):
    """``ShareConsumer``'s options; ``key_deserializer`` and ``value_deserializer`` are
    keyword parameters of their own (``DeserializerOptions`` documents them)."""

    group_id: Required[str]
    """The share group to join. Required."""

    acknowledgement_mode: Literal["implicit", "explicit"]
    """``"implicit"``: records handed out are accepted by the next read or
    ``commit()``; ``"explicit"``: each record must be acknowledged with
    ``acknowledge()``. Default: ``"implicit"``."""

    acknowledgement_commit_callback: (
        Callable[[Mapping[TopicPartition, frozenset[int]], Exception | None], None] | None
    )
    """Called with the offsets whose acknowledgements a broker answered, per partition,
    and ``None`` or the error it answered with. Default: ``None``."""

    max_poll_records: int
    """The most records one read hands out. Default: ``500``."""

    fetch_max_wait_ms: int
    """How long a broker holds a share fetch for ``fetch_min_bytes`` to arrive.
    Default: ``500`` ms."""

    fetch_min_bytes: int
    """A share fetch answer waits (at most ``fetch_max_wait_ms``) until this much data
    is there. Default: ``1`` bytes."""

    fetch_max_bytes: int
    """The most data one share fetch answer carries. Default: ``52428800`` bytes."""

    client_rack: str | None
    """This client's rack (KIP-392). Default: ``None``."""

    check_crcs: bool
    """Check each batch's CRC32C. Default: ``True``."""
