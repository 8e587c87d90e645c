"""The Producer: public API (``send``/``send_batch``/``flush``/``stop``), options,
topic/partition choice and buffer back-pressure.

``send()`` only buffers: it picks the partition, waits for ``buffer_memory`` space if
needed (up to ``max_block_ms``) and appends to the partition's open batch, or, for a
topic whose metadata is not known yet, to the topic's pending queue (``pending.py``).
The sender task does all I/O. The fast path of ``send()`` never suspends.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import re
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from operator import add
from typing import TYPE_CHECKING, Any, Final, Generic, NoReturn, Unpack, overload

from aiokproto._generic import SK, SV, Raw, T, U
from aiokproto.accel import native as _native
from aiokproto.accel import now_ms as _now_ms
from aiokproto.awaitables import DONE
from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.metadata import MetadataCache
from aiokproto.cluster.snapshot import ClusterSnapshot
from aiokproto.config import ClientConfig, split_options
from aiokproto.errors import (
    IllegalStateError,
    InvalidTopicError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    PurgedError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    TransactionAbortedError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokproto.lifecycle import StartStop, check_loop
from aiokproto.metrics.connections import ConnectionMetrics
from aiokproto.metrics.producer import ProducerMetrics
from aiokproto.metrics.registry import MetricsRegistry, MetricsSnapshot
from aiokproto.producer.accumulator import RECORD_CHARGE, Accumulator
from aiokproto.producer.batch import PartitionQueue, ProducerBatch
from aiokproto.producer.batch_builder import BatchBuilder
from aiokproto.producer.checks import (
    SerializationError as SerializationError,  # re-exported: its home before issue 32
)
from aiokproto.producer.checks import (
    _as_bytes,
    _header_charge,
    _listed_headers,
    _serialize,
    _serialize_ctx,
)
from aiokproto.producer.delivery import (
    BatchDelivery,
    DeliveryFuture,
    OnDelivery,
    Segment,
    first_delivered,
)
from aiokproto.producer.delivery import append_to as _append_to
from aiokproto.producer.options import (
    BATCH_HEADER,
    PRODUCER_OPTIONS,
    RECORD_OVERHEAD_BOUND,
    ProducerOptions,
    parse_producer_options,
)
from aiokproto.producer.partitioner import PartitionerFn, StickyPartitioner, partition_for_key
from aiokproto.producer.pending import PendingTopic, failed_place
from aiokproto.producer.sender import Sender
from aiokproto.producer.txn_state import Txn
from aiokproto.records.record import Header
from aiokproto.reprs import client_repr, connection_fields
from aiokproto.serialization import (
    AWAIT,
    ContextSerializer,
    MessageField,
    SerializationContext,
)
from aiokproto.serialization import in_context as _in_context
from aiokproto.serialization import serialized as _SERIALIZED
from aiokproto.structs import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    RecordMetadata,
    TopicPartition,
)
from aiokproto.telemetry.reporter import TelemetryReporter

if TYPE_CHECKING:
    import aiokproto.options  # TypedDicts for annotations only: ~2 ms to build
    from aiokproto.producer.transactions import TransactionManager

log = logging.getLogger(__name__)

#: send_batch gives the event loop a turn after buffering this many bytes
_YIELD_BYTES = 256 * 1024
_NONE_TYPE: Final = type(None)
# records for topics without metadata wait this long before their lookup starts, so
# the topics of a handler that yields between sends are asked for together
_PENDING_WINDOW_S: Final = 0.005
# what a broker accepts as a topic name (besides "." and ".."): a name outside it gets
# its InvalidTopicError from send() at once, not from its handle after a round trip
_LEGAL_TOPIC: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_BYTES_OR_NONE: Final = frozenset((bytes, _NONE_TYPE))

# Topic errors that waiting will not fix.
_FATAL_TOPIC_ERRORS = frozenset({InvalidTopicError.errno, TopicAuthorizationFailedError.errno})


class _TopicState:
    """What ``send()`` needs about one topic, rebuilt when the metadata snapshot changes."""

    __slots__ = (
        "available",
        "count",
        "name",
        "partitions",
        "queues",
        "sticky",
        "sticky_queue",
    )

    def __init__(
        self,
        name: str,
        snapshot: ClusterSnapshot,
        accumulator: Accumulator,
        sticky: StickyPartitioner,
    ) -> None:
        info = snapshot.topics[name]
        self.name = name
        self.partitions: tuple[int, ...] = tuple(sorted(info.partitions))
        self.available: tuple[int, ...] = tuple(
            p for p in self.partitions if info.partitions[p].leader >= 0
        )
        self.count = len(self.partitions)
        self.sticky = sticky
        self.queues: dict[int, PartitionQueue] = {
            p: accumulator.queue(name, p) for p in self.partitions
        }
        # the sticky partition's queue while its byte budget lasts (None: choose again)
        self.sticky_queue: PartitionQueue | None = None

    def choose_sticky(self, charge: int) -> PartitionQueue:
        pq = self.queues[self.sticky.partition(charge, self.partitions, self.available)]
        self.sticky_queue = pq
        return pq


def _bytes_list(items: list[Any], what: str) -> tuple[list[Any], bool]:
    """``items`` with every one that is not None as bytes (or raise), and whether any is
    None. A list of only bytes (the usual case) is checked at C speed and kept as is."""
    kinds = set(map(type, items))
    if not kinds <= _BYTES_OR_NONE:
        items = [v if v is None or v.__class__ is bytes else _as_bytes(v, what) for v in items]
    return items, _NONE_TYPE in kinds


def _charges(items: list[Any], has_none: bool, base: int) -> list[int]:
    """``base`` plus each item's length (0 for None)."""
    if has_none:
        return [base + (0 if v is None else len(v)) for v in items]
    return list(map(base.__add__, map(len, items)))


_TS_END: Final = 1 << 63


def _checked_partition(partition: object) -> int:
    """``send()``'s ``partition`` as an int: an int subclass (an ``IntEnum``) is taken,
    as it is once the topic is known, and a bool, another type or a negative number is
    a ``KafkaConfigError``, whether the topic's metadata is known yet or not."""
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise KafkaConfigError(f"partition must be an int >= 0 or None, not {partition!r}")
    return int(partition)


def _check_timestamp(timestamp_ms: Any) -> int:
    if timestamp_ms is None:
        return _now_ms()
    if (
        not isinstance(timestamp_ms, int)
        or isinstance(timestamp_ms, bool)
        or not (-1 <= timestamp_ms < _TS_END)
    ):
        raise SerializationError(
            f"timestamp_ms must be an int (milliseconds since the epoch), not {timestamp_ms!r}"
        )
    return timestamp_ms


def _int_in(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _checked_group(group: Any) -> ConsumerGroupMetadata:
    """``consumer.group_metadata()`` or a group id, every field of the wire's type."""
    if isinstance(group, str):
        group = ConsumerGroupMetadata(group)
    what = "send_offsets_to_transaction: group_metadata"
    if not isinstance(group, ConsumerGroupMetadata):
        raise KafkaConfigError(
            f"{what} must be consumer.group_metadata() or a group id, not {group!r}"
        )
    if not isinstance(group.group_id, str) or not group.group_id:
        raise KafkaConfigError(f"{what}: group_id must be a non-empty str, not {group.group_id!r}")
    if not _int_in(group.generation_id, -1, 2**31 - 1):
        raise KafkaConfigError(f"{what}: generation_id must be an int32 >= -1")
    if not isinstance(group.member_id, str):
        raise KafkaConfigError(f"{what}: member_id must be a str, not {group.member_id!r}")
    if group.group_instance_id is not None and not isinstance(group.group_instance_id, str):
        raise KafkaConfigError(f"{what}: group_instance_id must be a str or None")
    return group


def _checked_offsets(
    offsets: Any,
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets to commit, every field checked before anything is sent."""
    what = "send_offsets_to_transaction"
    if not isinstance(offsets, Mapping):
        raise KafkaConfigError(f"{what}: offsets must be a dict, not {type(offsets).__name__}")
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, value in offsets.items():
        if (
            not isinstance(tp, tuple)
            or len(tp) != 2
            or not isinstance(tp[0], str)
            or not tp[0]
            or not _int_in(tp[1], 0, 2**31 - 1)
        ):
            raise KafkaConfigError(f"{what}: {tp!r} is not a TopicPartition(topic, partition)")
        om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
        if not _int_in(om.offset, 0, 2**63 - 1):
            raise KafkaConfigError(
                f"{what}: the offset for {tp} must be an int >= 0, not {om.offset!r}"
            )
        if om.metadata is not None and not isinstance(om.metadata, str):
            raise KafkaConfigError(f"{what}: metadata for {tp} must be a str, not {om.metadata!r}")
        if not _int_in(om.leader_epoch, -1, 2**31 - 1):
            raise KafkaConfigError(f"{what}: leader_epoch for {tp} must be an int32 >= -1")
        out[TopicPartition(*tp)] = om
    return out


#: transaction states stop() and ``transaction()`` abort
_OPEN = frozenset({Txn.IN_TRANSACTION, Txn.ABORTABLE_ERROR, Txn.ABORTING})


class Producer(StartStop, Generic[SK, SV]):
    """An asyncio Kafka producer: ``async with Producer(bootstrap_servers=...) as p``.

    Options are Java's producer configs in snake_case, typed and documented in
    ``aiokproto.options.ProducerOptions`` (the configuration reference lists them).
    ``Producer[K, V]``: ``send()`` takes keys of type K and values of type V, the types
    ``key_serializer`` and ``value_serializer`` take; without a serializer, ``bytes``
    (or ``bytearray``, ``memoryview``).
    """

    # what send()'s compiled common case reads (accel: bind_send) is in slots
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_acc",
        "_max_charge",
        "_partitioner",
        "_plain",
        "_reserved",
        "_space_queue",
        "_topics",
        "_yield_next",
    )
    _acc: Accumulator  # set by start(); send() checks _plain/_accepting first

    # The overloads tell a type checker K and V from the serializers given.
    @overload
    def __init__(
        self: Producer[Raw, Raw],
        *,
        key_serializer: None = None,
        value_serializer: None = None,
        **options: Unpack[aiokproto.options.ProducerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Producer[T, Raw],
        *,
        key_serializer: Callable[[T], bytes | None] | ContextSerializer[T],
        value_serializer: None = None,
        **options: Unpack[aiokproto.options.ProducerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Producer[Raw, U],
        *,
        key_serializer: None = None,
        value_serializer: Callable[[U], bytes | None] | ContextSerializer[U],
        **options: Unpack[aiokproto.options.ProducerOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Producer[T, U],
        *,
        key_serializer: Callable[[T], bytes | None] | ContextSerializer[T],
        value_serializer: Callable[[U], bytes | None] | ContextSerializer[U],
        **options: Unpack[aiokproto.options.ProducerOptions],
    ) -> None: ...

    def __init__(
        self,
        *,
        key_serializer: Callable[[Any], bytes | None] | ContextSerializer[Any] | None = None,
        value_serializer: Callable[[Any], bytes | None] | ContextSerializer[Any] | None = None,
        **options: Any,
    ) -> None:
        """Check every option now (``KafkaConfigError`` names a wrong one); connect on
        ``start()`` or ``async with``."""
        if key_serializer is not None:
            options["key_serializer"] = key_serializer
        if value_serializer is not None:
            options["value_serializer"] = value_serializer
        config, own = split_options(options, PRODUCER_OPTIONS, "Producer")
        self.config: ClientConfig = config
        self.options: ProducerOptions = parse_producer_options(config, own)
        opts = self.options
        self._max_block = opts.max_block_ms / 1000
        self._key_serializer = opts.key_serializer
        self._value_serializer = opts.value_serializer
        # a ContextSerializer is awaited with the record's context, on its own path
        # (_send_in_context): decided here, so a plain callable costs nothing more
        self._ctx = _in_context(self._key_serializer, self._value_serializer)
        if self._ctx is not None:
            if self._ctx[0] is not None:
                self._key_serializer = None
            if self._ctx[1] is not None:
                self._value_serializer = None
            self._ctx_lock = asyncio.Lock()
            # sends holding or queued for the lock: while any is, none may take the
            # cached path (lock.locked() is False between a release and the next
            # holder waking: a record sent then overtook the queued one)
            self._ctx_waiting = 0
            # the contexts of records without headers, per (topic, field): made once
            self._ctx_of: dict[tuple[str, MessageField], SerializationContext] = {}
        # no plain serializer beside the context ones: their bytes may take _send_fast
        self._ctx_only = self._key_serializer is None and self._value_serializer is None
        self._partitioner: PartitionerFn | None = opts.partitioner
        # the largest charge a record may have: its whole batch must fit a request
        self._max_charge = opts.max_record_size - BATCH_HEADER - RECORD_OVERHEAD_BOUND
        self._client: ClusterClient | None = None
        self._starting: ClusterClient | None = None  # stop() during start() closes it
        self._sender: Sender | None = None
        self._registry = MetricsRegistry(
            config.client_id,
            window_ms=config.metrics_sample_window_ms,
            num_samples=config.metrics_num_samples,
        )
        self._conn_metrics = ConnectionMetrics(self._registry, "producer")
        self._metrics = ProducerMetrics(self._registry)
        self._metrics.gauges(
            # reserved: held by records waiting for their topic, or for a send() granted it
            available=lambda: opts.buffer_memory
            - (self._acc.used + self._reserved if self._running else 0),
            total=lambda: opts.buffer_memory,
            waiting=lambda: len(self._space_queue),
            in_flight=lambda: self._sender.requests_in_flight if self._sender else 0,
        )
        self._txn: TransactionManager | None = None  # with transactional_id
        self._telemetry: TelemetryReporter | None = None  # KIP-714 metrics push
        # transactions begun so far: a send that waited and finds another number has
        # outlived the transaction it was called in, and buffers nothing
        self._txn_round = 0
        self._topics: dict[str, _TopicState] = {}
        # records sent to topics whose metadata is not known yet, per topic, in send
        # order (their buffer_memory charge is in _reserved); while a topic has some,
        # it has no _TopicState, so later records go behind them
        self._pending: dict[str, PendingTopic] = {}
        # resolved _PENDING_WINDOW_S after the first of a group of new pending topics:
        # their lookups start together (None: no window open)
        self._pending_gate: asyncio.Future[None] | None = None
        self._sticky: dict[str, StickyPartitioner] = {}
        # topics the producer keeps in its metadata -> loop time of the last lookup
        self._kept: dict[str, float] = {}
        self._idle_timer: asyncio.TimerHandle | None = None
        # calls waiting for buffer memory, first come first served, and the bytes
        # reserved for those at the head that were let through
        self._space_queue: deque[_SpaceWait] = deque()
        self._reserved = 0
        self._stop_task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._running = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the one start() ran in
        self._accepting = False  # running and the sender is healthy
        # accepting, and records need no serializing: send()'s one check on its fast path
        self._plain = False
        self._closed = False
        # a batch filled up in the last call: yield once before buffering more
        self._yield_next = False

    def __repr__(self) -> str:
        return client_repr(self, self._repr_fields)

    def _repr_fields(self) -> list[str]:
        state = "running" if self._running else "closed" if self._closed else "new"
        fields = [state, *connection_fields(self.config)]
        if self.options.transactional_id is not None:
            fields.append(f"transactional_id={self.options.transactional_id!r}")
        if self._running:
            fields.append(f"undelivered={len(self)}")
        return fields

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Connect, learn the cluster, get a producer id (idempotence) and start sending."""
        if self._running:
            return
        if self._closed:
            raise IllegalStateError("this Producer was stopped; create a new one")
        client = self._starting = ClusterClient(self.config, self._conn_metrics)
        try:
            await client.start()
        finally:
            self._starting = None
        try:
            if self._closed:  # stop() was called while the cluster answered
                raise IllegalStateError("the Producer was stopped while starting")
            loop = asyncio.get_running_loop()
            sender_box: list[Sender] = []
            acc = Accumulator(
                self.options,
                loop,
                lambda: sender_box[0].wake(),
                self._space_released,
                self._metrics,
                lambda when: sender_box[0].wake_by(when),
            )
            sender = Sender(
                client, acc, self.options, self.config, self._on_fatal, self._on_metadata
            )
            sender_box.append(sender)
            txn = None
            if self.options.transactional_id is not None:
                # imported here: it and its four transaction codecs cost an idempotent
                # or plain producer's import ~10 ms (tests/test_import_cost.py)
                from aiokproto.producer.transactions import TransactionManager

                txn = TransactionManager(
                    client,
                    acc,
                    self.options,
                    self.config,
                    sender.wake,
                    self._on_txn_fatal,
                    self._on_txn_abortable,
                )
                await txn.start()
                sender.txn_v2 = txn.v2
            elif self.options.enable_idempotence:
                acc.set_identity(
                    await sender.init_producer_id(acc.identity, self.config.default_api_timeout_ms)
                )
        except BaseException:
            if txn is not None:
                await txn.close()
            await client.close()
            raise
        self._client, self._acc, self._sender, self._txn = client, acc, sender, txn
        sender.start()
        self._telemetry = TelemetryReporter(
            client,
            self._registry,
            "producer",
            self.config,
            resource={"transactional_id": self.options.transactional_id},
        )
        await self._telemetry.start()
        self._running = True
        self._loop = loop
        self._schedule_idle_sweep()
        # a transactional producer accepts records only inside a transaction
        self._accepting = txn is None
        self._plain = self._accepting and self._no_serializers()

    def _no_serializers(self) -> bool:
        return self._key_serializer is None and self._value_serializer is None and not self._ctx

    async def stop(self, timeout_ms: int | None = None) -> None:
        """Deliver what is buffered (within ``timeout_ms``, default
        ``delivery_timeout_ms``), fail what could not be, and close.

        Records still undelivered fail with ``KafkaTimeoutError``; ``send`` raises
        ``IllegalStateError`` from now on. Concurrent calls all wait for the same
        shutdown, which goes on if a caller is cancelled.
        """
        task = self._stop_task
        if task is None:
            if not self._running:
                self._closed = True
                if self._starting is not None:  # start() waits for the cluster: ends now
                    await self._starting.close()
                return
            check_loop(self, self._loop)
            self._running = self._accepting = self._plain = False
            self._closed = True
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            assert self._client is not None
            self._stopping.set()
            self._client.metadata.interrupt_waiters()  # sends waiting for a topic give up
            self._fail_space_waiters(IllegalStateError("the Producer was stopped"))
            task = self._stop_task = asyncio.get_running_loop().create_task(
                self._shutdown(timeout_ms), name="aiokproto-producer-stop"
            )
        await asyncio.shield(task)

    async def _shutdown(self, timeout_ms: int | None) -> None:
        acc, sender, client = self._acc, self._sender, self._client
        assert acc is not None and sender is not None and client is not None
        timeout = (self.options.delivery_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        acc.closing = True
        sender.wake()
        txn = self._txn
        try:
            if txn is not None and txn.state.state in _OPEN:
                # an open transaction is aborted: its records must never be committed
                try:
                    async with asyncio.timeout(timeout):
                        await txn.abort(self._wait_in_flight)
                except (KafkaError, TimeoutError) as exc:
                    log.warning("stop(): aborting the open transaction failed: %s", exc)
            if self._pending and sender.fatal is None:
                # records sent before their topic's metadata was known are still sent
                loop = asyncio.get_running_loop()
                started = loop.time()
                await self._wait_pending(timeout)
                timeout = max(0.0, timeout - (loop.time() - started))
            futures = [b.future for b in acc.incomplete]
            if futures and sender.fatal is None:
                await asyncio.wait(futures, timeout=timeout)
        finally:
            if self._fail_pending(
                KafkaTimeoutError(
                    "the Producer was stopped before the record's topic was in metadata"
                )
            ):
                log.warning("producer stopped with records still waiting for topic metadata")
            await sender.close()
            left = acc.unsent_or_in_flight()
            if left:
                log.warning("producer stopped with %d batch(es) undelivered", left)
            acc.fail_all(
                KafkaTimeoutError(
                    f"the Producer was stopped before the record was delivered "
                    f"(stop timeout {timeout * 1000:.0f} ms)"
                )
            )
            if txn is not None:
                await txn.close(timeout)  # a commit or abort in progress may finish
            if self._telemetry is not None:
                await self._telemetry.close()  # the terminating push, briefly bounded
            await client.close()

    close = stop
    """The same as ``stop()``, under the name other clients use."""

    def _check_running(self) -> NoReturn:
        if self._sender is not None and self._sender.fatal is not None:
            raise self._sender.fatal.with_traceback(None)
        if self._closed:
            raise IllegalStateError("the Producer is stopped; create a new one to send")
        if self._txn is not None and self._running:
            self._txn.state.check("send")
            raise IllegalStateError("send(): the transaction is not open")
        raise IllegalStateError("the Producer is not started; use 'async with' or start()")

    def _check_after_wait(self, txn_round: int) -> NoReturn:
        """Why a call that waited may not buffer its records now."""
        if not self._accepting:
            self._check_running()
        raise IllegalStateError(
            f"the transaction this call was made in (number {txn_round}) ended while it "
            "waited for metadata or buffer space: nothing was buffered"
        )

    def _on_txn_fatal(self, error: KafkaError) -> None:
        """The producer cannot go on (fenced, not authorized...): every record still
        held fails with the error, and every later call raises it."""
        sender = self._sender
        if sender is not None and sender.fatal is None:
            sender.fatal = error
        self._on_fatal(error)
        acc: Accumulator | None = getattr(self, "_acc", None)  # None: start() failed
        if acc is not None:
            acc.fail_all(error)
        self._fail_space_waiters(error)

    def _on_txn_abortable(self, error: KafkaError) -> None:
        """The transaction cannot commit any more: send() raises at once (instead of
        buffering records that will never be sent, then waiting max_block_ms for the
        memory they hold), and so do the calls waiting for metadata or memory."""
        if self._accepting:
            self._stop_accepting()
        if self._txn is not None:
            self._fail_space_waiters(self._txn.state.abortable_error("send"))
            self._fail_pending(self._txn.state.abortable_error("send"))

    async def _give_sender_a_turn(self) -> None:
        self._yield_next = False
        await asyncio.sleep(0)

    def _on_fatal(self, error: KafkaError | None = None) -> None:
        """The producer cannot go on (``error``, else the sender's): records waiting for
        their topic fail with it, since they would be placed behind a sender that sends
        no more (the sender fails the buffered ones)."""
        self._accepting = self._plain = False
        if error is None and self._sender is not None:
            error = self._sender.fatal
        if error is not None:
            self._fail_pending(error)

    def _on_metadata(self) -> None:
        """A new metadata snapshot: topic states are rebuilt on their next use."""
        self._topics.clear()

    # -- sending ------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: SV | None = None,
        key: SK | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
        *,
        on_delivery: Callable[[KafkaError | None, RecordMetadata | None], object]
        | None = None,
    ) -> DeliveryFuture:
        """Buffer one record; returns an awaitable that gives its ``RecordMetadata``.

        Waits only when ``buffer_memory`` is full (``KafkaTimeoutError`` after
        ``max_block_ms``). A record for a topic whose metadata is not known yet waits
        for it in a queue of its own and its handle is returned at once; a topic that
        does not appear within ``max_block_ms`` fails the handle with
        ``KafkaTimeoutError``. Serializers are
        applied to keys/values that are not None. A record too large for
        ``max_request_size``/``buffer_memory`` gets a handle that fails with
        ``RecordTooLargeError`` (nothing else is affected).

        ``on_delivery(error, metadata)`` (confluent-kafka's per-message callback) is
        called on the event loop once the record's fate is known: ``(None,
        RecordMetadata)`` if it was written, ``(error, None)`` if not. An exception it
        raises is logged, never propagated. It is called, not awaited: a coroutine
        function is refused (``TypeError``).
        """
        if on_delivery is not None:
            if not callable(on_delivery):
                raise TypeError(f"on_delivery must be callable, not {on_delivery!r}")
            if inspect.iscoroutinefunction(on_delivery):
                # called, never awaited: its coroutine would never run
                raise TypeError(
                    f"on_delivery must be a plain function, not a coroutine function "
                    f"({on_delivery!r}): it is called on the event loop, not awaited; "
                    "start a task from it for async work, or await the handle instead"
                )
            sent = await _send(self, topic, value, key, partition, timestamp_ms, headers)
            sent.add_done_callback(OnDelivery(on_delivery))
            return sent
        if _send_fast is not None and partition is None and headers is None:
            # the common case below in one C call; None: something is off it
            handle = _send_fast(self, topic, value, key, timestamp_ms)
            if handle is not None:
                return handle
        if self._yield_next:
            await self._give_sender_a_turn()
        txn_round = self._txn_round
        if not self._plain:
            if not self._accepting:
                self._check_running()
            if self._ctx is not None and not _SERIALIZED.get():
                now = self._serialize_now(topic, key, value, headers)
                if now is None:  # a serializer must await (a registry look-up)
                    return await self._send_in_context(
                        topic, value, key, partition, timestamp_ms, headers
                    )
                key, value = now
                if (
                    self._ctx_only
                    and _send_fast is not None
                    and partition is None
                    and headers is None
                    and self._accepting
                ):
                    # _plain says "the record is bytes": true of this one, for this
                    # call only (nothing is awaited before it is false again)
                    self._plain = True
                    try:
                        handle = _send_fast(self, topic, value, key, timestamp_ms)
                    finally:
                        self._plain = False
                    if handle is not None:
                        return handle
            if self._key_serializer is not None and key is not None:
                key = _serialize(self._key_serializer, key, "key")
            if self._value_serializer is not None and value is not None:
                value = _serialize(self._value_serializer, value, "value")
        # Every check happens before anything is buffered: a bad record fails alone.
        # From here key and value are bytes (the parameters' types are what callers
        # pass; the ignores below say so without a cast call on this hot path).
        if value is not None and value.__class__ is not bytes:
            value = _as_bytes(value, "value")  # type: ignore[assignment]
        if key is not None and key.__class__ is not bytes:
            key = _as_bytes(key, "key")  # type: ignore[assignment]
        vsize = -1 if value is None else len(value)  # type: ignore[arg-type]
        ksize = -1 if key is None else len(key)  # type: ignore[arg-type]
        charge = RECORD_CHARGE + vsize + ksize
        if headers:
            if not isinstance(headers, (list, tuple)):
                headers = _listed_headers(headers)
            charge += _header_charge(headers)
        if timestamp_ms is None:
            timestamp_ms = _now_ms()
        elif timestamp_ms.__class__ is not int or not -1 <= timestamp_ms < _TS_END:
            # an int out of range would be buffered and fail its whole batch at build
            timestamp_ms = _check_timestamp(timestamp_ms)
        if charge > self._max_charge:
            return DeliveryFuture.failed(self._too_large(topic, charge))
        waited = False
        try:
            ts = self._topics[topic]  # cleared by the sender when metadata changes
        except (KeyError, TypeError):
            if topic.__class__ is str and topic and (
                topic in self._pending or not self._known(topic)
            ):
                return await self._send_pending(
                    topic, key, value, headers, charge, partition, timestamp_ms, txn_round  # type: ignore[arg-type]
                )
            ts = await self._topic_state_after_pending(topic)
            waited = True
        pq: PartitionQueue | None
        if partition is not None:
            pq = ts.queues.get(partition) if partition.__class__ is int else None
            if pq is None:
                pq = await self._partition_queue(ts, partition)
                waited = True
        else:
            pq = self._queue_for(ts, key, charge)  # type: ignore[arg-type]
        acc = self._acc
        if acc.used + self._reserved + charge > acc.limit or self._space_queue:
            await self._wait_for_space(charge)
            waited = True
        if waited:
            if not self._accepting or txn_round != self._txn_round:
                self._check_after_wait(txn_round)  # stopped, failed or transaction over
            self._keep(topic)
        if not pq.txn_added:
            self._track(pq)
        batch = pq.open
        if batch is not None:
            handle = _append_to(
                DeliveryFuture, batch, timestamp_ms, key, value, headers, ksize, vsize  # type: ignore[arg-type]
            )
            if handle is not None:
                batch.charge += charge
                acc.used += charge
                return handle
        handle = acc.append(pq, timestamp_ms, key, value, headers, charge)  # type: ignore[arg-type]
        if batch is not None:
            # A batch just filled up: the next call lets the sender ship it. Not now:
            # a cancellation after buffering would make the caller retry a duplicate.
            self._yield_next = True
        return handle

    async def _send_in_context(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[Header] | None,
    ) -> DeliveryFuture:
        """send() through the context serializers, one record at a time in call order:
        the lock is held until the record is buffered, so a record whose serializer
        awaits the registry keeps the records sent after it behind it (records of one
        partition stay in send order)."""
        kser, vser = self._ctx  # type: ignore[misc]
        self._ctx_waiting += 1
        try:
            async with self._ctx_lock:
                if kser is not None and key is not None:
                    ctx = SerializationContext(topic, MessageField.KEY, headers)
                    key = await _serialize_ctx(kser, key, ctx, "key")
                if vser is not None and value is not None:
                    ctx = SerializationContext(topic, MessageField.VALUE, headers)
                    value = await _serialize_ctx(vser, value, ctx, "value")
                token = _SERIALIZED.set(True)  # this task's inner send() skips this path
                try:
                    return await self.send(topic, value, key, partition, timestamp_ms, headers)
                finally:
                    _SERIALIZED.reset(token)
        finally:
            self._ctx_waiting -= 1

    def _serialize_now(
        self, topic: str, key: Any, value: Any, headers: Sequence[Header] | None
    ) -> tuple[Any, Any] | None:
        """(key, value) through the context serializers' ``serialize_now``, or None if
        one must await, or an earlier record is still awaiting (it goes first).

        The common case: the serializers answer from their caches, no coroutine is
        made, and the bytes take the compiled path (benchmarks/serdes_bench.py: 3.4 µs
        less per Avro record than awaiting each)."""
        if self._ctx_waiting:
            return None
        kser, vser = self._ctx  # type: ignore[misc]
        what = "key"
        try:
            if kser is not None and key is not None:
                key = kser.serialize_now(key, self._context(topic, _KEY, headers))
                if key is AWAIT:
                    return None
            what = "value"
            if vser is not None and value is not None:
                value = vser.serialize_now(value, self._context(topic, _VALUE, headers))
                if value is AWAIT:
                    return None
        except KafkaError:
            raise
        except Exception as exc:
            raise SerializationError(f"the {what}_serializer raised {exc!r}") from exc
        return key, value

    def _context(
        self, topic: str, field: MessageField, headers: Sequence[Header] | None
    ) -> SerializationContext:
        if headers is not None:
            return SerializationContext(topic, field, headers)
        ctx = self._ctx_of.get((topic, field))
        if ctx is None:
            if len(self._ctx_of) >= 10_000:  # topics come and go: keep it bounded
                self._ctx_of.clear()
            ctx = self._ctx_of[(topic, field)] = SerializationContext(topic, field)
        return ctx

    async def _send_batch_in_context(
        self,
        topic: str,
        values: Iterable[Any],
        keys: Iterable[Any] | None,
        partition: int | None,
        timestamp_ms: int | None,
        headers: Sequence[Header] | None,
    ) -> BatchDelivery:
        """send_batch() through the context serializers, in call order (as above)."""
        kser, vser = self._ctx  # type: ignore[misc]
        self._ctx_waiting += 1
        try:
            async with self._ctx_lock:
                vals = await self._ctx_list(vser, topic, values, MessageField.VALUE, headers)
                key_list = None if keys is None else await self._ctx_list(
                    kser, topic, keys, MessageField.KEY, headers
                )
                token = _SERIALIZED.set(True)
                try:
                    return await self.send_batch(
                        topic,
                        vals,
                        keys=key_list,
                        partition=partition,
                        timestamp_ms=timestamp_ms,
                        headers=headers,
                    )
                finally:
                    _SERIALIZED.reset(token)
        finally:
            self._ctx_waiting -= 1

    async def _ctx_list(
        self,
        ser: ContextSerializer[Any] | None,
        topic: str,
        items: Iterable[Any],
        field: MessageField,
        headers: Sequence[Header] | None,
    ) -> list[Any]:
        try:
            listed = list(items)
        except TypeError:
            raise SerializationError(
                f"send_batch {field}s must be an iterable, not {type(items).__name__}"
            ) from None
        if ser is None:
            return listed
        ctx = SerializationContext(topic, field, headers)
        what = str(field)
        out: list[Any] = []
        for v in listed:
            if v is not None:
                try:
                    b = ser.serialize_now(v, ctx)  # from the serializer's cache: no coroutine
                except KafkaError:
                    raise
                except Exception as exc:
                    raise SerializationError(f"the {what}_serializer raised {exc!r}") from exc
                v = await _serialize_ctx(ser, v, ctx, what) if b is AWAIT else b
            out.append(v)
        return out

    async def send_and_wait(
        self,
        topic: str,
        value: SV | None = None,
        key: SK | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> RecordMetadata:
        """``send`` and wait for delivery."""
        check_loop(self, self._loop)
        handle = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await handle

    def create_batch(self) -> BatchBuilder:
        """An empty batch to fill with ``append()`` and hand to
        ``send_batch(batch, topic, partition=p)`` (aiokafka's batch interface)."""
        if self._ctx is not None:
            raise KafkaConfigError(
                "create_batch(): append() is synchronous and cannot await a context "
                "serializer; use send() or send_batch(topic, values)"
            )
        return BatchBuilder(self.options.batch_size, self._key_serializer, self._value_serializer)

    @overload
    async def send_batch(
        self,
        topic: str,
        values: Iterable[SV | None],
        *,
        keys: Iterable[SK | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> BatchDelivery: ...

    @overload
    async def send_batch(
        self, topic: BatchBuilder, values: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]: ...

    async def send_batch(
        self,
        topic: str | BatchBuilder,
        values: Iterable[SV | None] | str,
        *,
        keys: Iterable[SK | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[Header] | None = None,
    ) -> BatchDelivery | asyncio.Future[RecordMetadata]:
        """Buffer many records of one topic in one call (the fast path for ingest).

        ``values`` (and ``keys``, same length) are appended in order; every record gets
        ``timestamp_ms`` (default: now) and ``headers``. With ``partition`` set (or no
        keys) they go to one partition in as few batches as possible; with keys each
        goes to its key's partition. Returns one awaitable for all: awaiting it gives
        their ``RecordMetadata`` in order, or raises the first delivery error.

        All or nothing: every record is checked, its partition chosen and buffer space
        waited for before the first one is buffered, so a call that raises (or is
        cancelled) has buffered nothing and can be retried without duplicates. A call
        larger than ``buffer_memory`` waits for the buffer to empty, then goes in whole.

        ``send_batch(batch, topic, partition=p)`` sends a ``create_batch()`` builder
        instead (aiokafka's form) and returns a future of its first record's metadata.
        """
        if isinstance(topic, BatchBuilder):
            if not isinstance(values, str) or partition is None:
                raise KafkaConfigError("send_batch(batch, topic, partition=...) needs both")
            return await self._send_built(topic, values, partition)
        if self._ctx is not None and not _SERIALIZED.get():
            return await self._send_batch_in_context(
                topic, values, keys, partition, timestamp_ms, headers
            )
        if self._yield_next:
            await self._give_sender_a_turn()
        txn_round = self._txn_round
        if not self._accepting:
            self._check_running()
        try:
            vals: list[Any] = list(values)
        except TypeError:
            raise SerializationError(
                f"send_batch values must be an iterable, not {type(values).__name__}"
            ) from None
        if self._value_serializer is not None:
            ser = self._value_serializer
            vals = [None if v is None else _serialize(ser, v, "value") for v in vals]
        vals, null_values = _bytes_list(vals, "value")
        key_list: list[Any] | None = None
        null_keys = False
        if keys is not None:
            try:
                key_list = list(keys)
            except TypeError:
                raise SerializationError(
                    f"send_batch keys must be an iterable, not {type(keys).__name__}"
                ) from None
            if len(key_list) != len(vals):
                raise SerializationError(
                    f"send_batch got {len(key_list)} keys for {len(vals)} values"
                )
            if self._key_serializer is not None:
                kser = self._key_serializer
                key_list = [None if k is None else _serialize(kser, k, "key") for k in key_list]
            key_list, null_keys = _bytes_list(key_list, "key")
        extra = 0
        if headers:
            if not isinstance(headers, (list, tuple)):
                headers = _listed_headers(headers)
            extra = _header_charge(headers)
        timestamp = _check_timestamp(timestamp_ms)
        charges = _charges(vals, null_values, RECORD_CHARGE + extra)
        if key_list is not None:
            charges = list(map(add, charges, _charges(key_list, null_keys, 0)))
        biggest = max(charges, default=0)
        if biggest > self._max_charge:
            raise self._too_large(topic, biggest)
        n = len(vals)
        waited = False
        ts = self._topics.get(topic) if isinstance(topic, str) else None
        if ts is None:
            ts = await self._topic_state_after_pending(topic)
            waited = True
        # Every record's partition, before anything is buffered (a partitioner may raise).
        queues: list[PartitionQueue] = []
        runs: list[tuple[int, int]] = []  # (start, stop) of consecutive same-partition records
        if partition is not None:
            pq = ts.queues.get(partition) if partition.__class__ is int else None
            if pq is None:
                pq = await self._partition_queue(ts, partition)
                waited = True
            if n:
                queues.append(pq)
                runs.append((0, n))
        elif key_list is None and self._partitioner is None:
            # the sticky choices a send() per record would make, a run at a time
            for part, start, stop in ts.sticky.runs(charges, ts.partitions, ts.available):
                queues.append(ts.queues[part])
                runs.append((start, stop))
            if queues:
                ts.sticky_queue = queues[-1]  # send() goes on where this call ended
        else:
            last = -1
            for i in range(n):
                part = self._choose(ts, None if key_list is None else key_list[i], charges[i])
                if part != last:
                    if runs:
                        runs[-1] = (runs[-1][0], i)
                    queues.append(ts.queues[part])
                    runs.append((i, n))
                    last = part
        acc = self._acc
        total = sum(charges)
        if acc.used + self._reserved + total > acc.limit or self._space_queue:
            await self._wait_for_space(total)
            waited = True
        if waited:
            if not self._accepting or txn_round != self._txn_round:
                self._check_after_wait(txn_round)  # stopped, failed or transaction over
            self._keep(topic)
        # From here on nothing suspends: the call buffers all of it or (a bug) none.
        for pq in queues:
            if not pq.txn_added:
                self._track(pq)
        segments: list[Segment] = []
        for pq, (start, stop) in zip(queues, runs, strict=True):
            appended = acc.append_many(pq, timestamp, key_list, vals, charges, start, stop, headers)
            segments.extend(Segment(*seg) for seg in appended)
        if total >= _YIELD_BYTES or len(segments) > len(runs):
            self._yield_next = True  # full batches: the next call lets the sender ship
        return BatchDelivery(segments, key_list, vals, timestamp)

    async def _send_built(
        self, batch: BatchBuilder, topic: str, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        """All of a built batch's records to one partition, all or nothing."""
        if batch.sent:
            raise IllegalStateError(
                "send_batch: this batch was sent already (sending it again would write "
                "its records twice); create_batch() a new one"
            )
        batch.close()
        records = batch.records
        if not records:
            raise KafkaConfigError("send_batch: the batch has no records")
        if self._yield_next:
            await self._give_sender_a_turn()
        txn_round = self._txn_round
        if not self._accepting:
            self._check_running()
        biggest = max(r.charge for r in records)
        if biggest > self._max_charge:
            raise self._too_large(topic, biggest)
        ts = await self._topic_state_after_pending(topic)
        pq = ts.queues.get(partition) if partition.__class__ is int else None
        if pq is None:
            pq = await self._partition_queue(ts, partition)
        acc = self._acc
        total = sum(r.charge for r in records)
        if acc.used + self._reserved + total > acc.limit or self._space_queue:
            await self._wait_for_space(total)
        if not self._accepting or txn_round != self._txn_round:
            self._check_after_wait(txn_round)
        self._keep(topic)
        # no suspension from here: every record is buffered, or (a bug) none
        if not pq.txn_added:
            self._track(pq)
        filled = pq.open
        handles = [
            acc.append(pq, r.timestamp_ms, r.key, r.value, r.headers, r.charge) for r in records
        ]
        batch.sent = True
        if pq.open is not filled or len({id(h.batch) for h in handles}) > 1:
            self._yield_next = True  # full batches: the next call lets the sender ship
        return first_delivered(handles)

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything buffered now, ignoring linger, and wait until each batch is
        delivered or failed. ``KafkaTimeoutError`` if that takes over ``timeout_ms``."""
        if not self._running:
            self._check_running()
        check_loop(self, self._loop)
        acc, sender = self._acc, self._sender
        assert acc is not None and sender is not None
        timeout = None if timeout_ms is None else timeout_ms / 1000
        if self._pending:  # records waiting for their topic's metadata are flushed too
            loop = asyncio.get_running_loop()
            started = loop.time()
            if not await self._wait_pending(timeout):
                raise KafkaTimeoutError(
                    f"flush: records still wait for their topic's metadata after "
                    f"{timeout_ms} ms"
                )
            if timeout is not None:
                timeout = max(0.0, timeout - (loop.time() - started))
        futures = [b.future for b in acc.incomplete]
        if not futures:
            return
        acc.flushing += 1
        sender.wake()
        try:
            _, pending = await asyncio.wait(futures, timeout=timeout)
        finally:
            acc.flushing -= 1
        if pending:
            raise KafkaTimeoutError(
                f"flush: {len(pending)} batch(es) still undelivered after {timeout_ms} ms"
            )

    def __len__(self) -> int:
        """Records not delivered yet: buffered or in flight (confluent-kafka's
        ``len(producer)``), and records waiting for their topic's metadata. Records
        still waiting in ``send()`` for memory are not counted."""
        acc = getattr(self, "_acc", None)
        waiting = sum(len(pt) for pt in getattr(self, "_pending", {}).values())
        return waiting + (0 if acc is None else acc.undelivered())

    def __bool__(self) -> bool:
        return True  # a producer with nothing undelivered is still a producer

    def purge(self) -> int:
        """Drop the records buffered and not sent yet: their handles fail with
        ``PurgedError`` (and ``flush()`` stops waiting for them). Records in flight, or
        waiting to be retried, may already be written and are left to finish. Returns
        the number of records dropped.

        In a transaction, purging makes it abortable (as in confluent-kafka): the
        records are not in it, so ``commit_transaction()`` raises and
        ``abort_transaction()`` ends it."""
        if not self._running:
            return 0
        error = PurgedError("purged before it was sent (Producer.purge())")
        waiting = self._fail_pending(error)
        if waiting:
            self._pending_failed(error)
        return waiting + self._acc.purge(error)

    async def _wait_in_flight(self) -> bool:
        """Wait (within max_block_ms) for every batch still held to be resolved; False
        if some still are not."""
        futures = [b.future for b in self._acc.incomplete]
        if not futures:
            return True
        self._acc.flushing += 1
        assert self._sender is not None
        self._sender.wake()
        try:
            _, pending = await asyncio.wait(futures, timeout=self.options.max_block_ms / 1000)
        finally:
            self._acc.flushing -= 1
        return not pending

    # -- transactions ---------------------------------------------------------------

    def _need_txn(self, call: str) -> TransactionManager:
        if self.options.transactional_id is None:
            raise IllegalStateError(f"{call}() needs a Producer created with transactional_id")
        if self._sender is not None and self._sender.fatal is not None:
            raise self._sender.fatal.with_traceback(None)
        if self._txn is None or not self._running:
            self._check_running()
        return self._txn

    def _track(self, pq: PartitionQueue) -> None:
        assert self._txn is not None
        self._txn.track(pq)

    def begin_transaction(self) -> Awaitable[None]:
        """Open a transaction: ``send()`` is allowed until it is committed or aborted.

        Nothing is sent to the broker here, so it can be called with or without
        ``await`` (aiokafka's is a plain method)."""
        txn = self._need_txn("begin_transaction")
        txn.begin()
        self._txn_round += 1
        self._accepting = True
        self._plain = self._no_serializers()
        return DONE

    async def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it (EndTxn).

        If a record or ``send_offsets_to_transaction`` failed, this raises that error
        and the transaction must be aborted. ``KafkaTimeoutError`` (within
        ``max_block_ms``) leaves the commit pending: call this again to finish it."""
        txn = self._need_txn("commit_transaction")
        txn.state.check("commit_transaction")
        self._stop_accepting()
        # records still waiting for their topic's metadata are placed (or fail, and the
        # commit with them) before the transaction's partitions are final
        if not await self._wait_pending(self._max_block):
            raise KafkaTimeoutError(
                f"commit_transaction: records still wait for their topic's metadata after "
                f"{self.options.max_block_ms} ms (max_block_ms); call commit_transaction() "
                "again to finish"
            )
        await txn.commit(self._flush_transaction)

    async def _flush_transaction(self) -> None:
        try:
            await self.flush(timeout_ms=self.options.max_block_ms)
        except KafkaTimeoutError as exc:
            raise KafkaTimeoutError(
                f"commit_transaction: {exc}; call commit_transaction() again to finish"
            ) from exc

    async def abort_transaction(self) -> None:
        """Abort the transaction: records not sent yet fail with
        ``TransactionAbortedError``, and none of its records is ever visible to
        read_committed consumers."""
        txn = self._need_txn("abort_transaction")
        txn.state.check("abort_transaction")
        self._stop_accepting()
        self._fail_pending(
            TransactionAbortedError("not sent: the transaction was aborted before its "
                                    "topic's metadata was known")
        )
        await txn.abort(self._wait_in_flight)

    def _stop_accepting(self) -> None:
        """The transaction ends: sends still waiting (for metadata, for buffer space)
        wake up now and buffer nothing."""
        self._accepting = self._plain = False
        assert self._client is not None
        self._client.metadata.interrupt_waiters()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """``async with producer.transaction():`` begins a transaction, commits it when
        the block ends normally, and aborts it when the block (or the commit) raises,
        re-raising that error."""
        txn = self._need_txn("transaction")
        await self.begin_transaction()
        try:
            yield
        except BaseException:
            if txn.state.state in _OPEN:
                try:
                    await self.abort_transaction()
                except KafkaError as abort_error:
                    log.warning("aborting the transaction failed: %s", abort_error)
            raise
        try:
            await self.commit_transaction()
        except KafkaError:
            if txn.state.state is Txn.ABORTABLE_ERROR:
                await self.abort_transaction()
            raise

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit a consumer group's offsets as part of this transaction (consume,
        transform, produce: exactly once).

        ``group_metadata`` is ``consumer.group_metadata()``: the broker then refuses
        the offsets of a member the group has moved past (``CommitFailedError``; abort
        the transaction). A group id alone (aiokafka's form) skips that check."""
        txn = self._need_txn("send_offsets_to_transaction")
        group = _checked_group(group_metadata)
        checked = _checked_offsets(offsets)
        if not checked:
            return
        # records sent before, still waiting for their topic's metadata, are placed
        # first: TxnOffsetCommit names topics by id once the metadata knows them all
        await self._wait_pending(self._max_block)
        await txn.send_offsets(checked, group)

    async def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids (waits up to ``max_block_ms`` for its metadata)."""
        if not self._running:
            self._check_running()
        ts = await self._topic_state(topic, sending=False)
        return set(ts.partitions)

    def metrics(self) -> MetricsSnapshot:
        """The producer's metrics now, under Java's names: ``producer-metrics``
        (``record-send-rate``, ``record-error-rate``, ``batch-size-avg``,
        ``compression-rate-avg``, ``buffer-available-bytes``, ``request-latency-avg``...),
        ``producer-topic-metrics`` per topic and ``producer-node-metrics`` per broker.
        Works before start and after stop."""
        return self._registry.snapshot()

    def client_instance_id(self) -> uuid.UUID | None:
        """The id the broker gave this client for KIP-714 metrics (Java's
        ``clientInstanceId()``); None until a broker answered, when no broker supports
        client metrics, or with ``enable_metrics_push=False``."""
        return None if self._telemetry is None else self._telemetry.client_instance_id()

    # -- partitions -----------------------------------------------------------------

    def _queue_for(self, ts: _TopicState, key: bytes | None, charge: int) -> PartitionQueue:
        """The queue of a record without an explicit partition: the sticky one while
        its budget lasts (keyless, no partitioner), else the one chosen."""
        if key is None and self._partitioner is None:
            sticky = ts.sticky
            pq = ts.sticky_queue
            if pq is not None and sticky.left > 0:
                sticky.left -= charge
                return pq
            return ts.choose_sticky(charge)
        return ts.queues[self._choose(ts, key, charge)]

    def _choose(self, ts: _TopicState, key: bytes | None, charge: int) -> int:
        if self._partitioner is not None:
            part = self._partitioner(key, ts.partitions, ts.available)
            if part not in ts.queues:
                raise KafkaError(
                    f"the partitioner returned {part!r} for topic {ts.name}, which has "
                    f"partitions {ts.partitions[0]}..{ts.partitions[-1]}"
                )
            return part
        if key is not None:
            return partition_for_key(key, ts.count)
        return ts.sticky.partition(charge, ts.partitions, ts.available)

    async def _topic_state(
        self, topic: str, *, sending: bool = True, pending: bool = False
    ) -> _TopicState:
        """The topic's state from the current metadata, waiting for it if unknown.

        ``sending``: for a call that will buffer records, which gives up when the
        producer stops accepting them (stopped, failed, or outside a transaction);
        otherwise only when it stops. ``pending``: for the records waiting for the
        topic (``_drain_pending``), which give up when cancelled or, once the producer
        is stopping, when the brokers say the topic does not exist."""
        client, acc = self._client, self._acc
        assert client is not None and acc is not None
        meta = client.metadata
        if not isinstance(topic, str) or not topic:
            raise InvalidTopicError(f"topic must be a non-empty str, not {topic!r}")
        # This call's own hold on the topic while it waits. The producer keeps one of
        # its own only for a topic that was there, until it is idle: a send() to a
        # missing topic had left it in every metadata refresh for good.
        meta.track([topic])
        try:
            snapshot = await self._wait_for_topic(meta, topic, sending, pending)
            sticky = self._sticky.get(topic)
            if sticky is None:
                sticky = self._sticky[topic] = StickyPartitioner(self.options.sticky_bytes)
            ts = _TopicState(topic, snapshot, acc, sticky)
            if topic not in self._pending:  # else they go first (_drain_pending)
                self._topics[topic] = ts
            self._keep(topic)
            self._kept[topic] = asyncio.get_running_loop().time()  # looked up now
            return ts
        finally:
            meta.untrack([topic])

    async def _wait_for_topic(
        self, meta: MetadataCache, topic: str, sending: bool, pending: bool = False
    ) -> ClusterSnapshot:
        def alive() -> bool:
            if pending:
                # records already sent wait for their topic through stop() (they are
                # delivered if it comes), unless the brokers said it does not exist
                return not (
                    self._closed
                    and meta.unknown(topic)
                    and not self.config.allow_auto_create_topics
                )
            return self._accepting if sending else self._running

        def known(snap: ClusterSnapshot) -> bool:
            if not alive():
                return True  # stopped while waiting: give up at once
            info = snap.topics.get(topic)
            if info is not None and info.partitions:
                return True
            if meta.unknown(topic):  # say at once why a send() waits (once per wait)
                meta.warn_send_waits(topic, log, self._max_block)
            return meta.topic_errors.get(topic) in _FATAL_TOPIC_ERRORS

        snapshot = meta.snapshot
        if not known(snapshot):
            try:
                if pending:
                    snapshot = await self._wait_tracked(meta, known)
                else:
                    snapshot = await meta.wait_for(known, self._max_block, topics=(topic,))
            except KafkaConnectionError:
                self._check_running()
                raise
            except KafkaTimeoutError:
                code = meta.topic_errors.get(topic)
                why = f"; the broker says {for_code(code).__name__}" if code else ""
                fix = (
                    "enable auto.create.topics.enable on the brokers"
                    if self.config.allow_auto_create_topics
                    else "let the producer ask for it (allow_auto_create_topics=True)"
                )
                raise KafkaTimeoutError(
                    f"topic {topic!r} not present in metadata after "
                    f"{self.options.max_block_ms} ms (max_block_ms){why}. Create it, or {fix}"
                ) from None
        if not alive():
            if pending:  # sent while running: say what it waited for
                raise IllegalStateError(
                    f"the Producer was stopped before topic {topic!r} was in metadata "
                    "(the brokers do not know it)"
                )
            self._check_running()
        code = meta.topic_errors.get(topic)
        if code in _FATAL_TOPIC_ERRORS and topic not in snapshot.topics:
            raise for_code(code)(f"topic {topic!r}")
        return snapshot

    # -- records waiting for their topic's metadata ------------------------------------

    def _known(self, topic: str) -> bool:
        assert self._client is not None
        info = self._client.metadata.snapshot.topics.get(topic)
        return info is not None and bool(info.partitions)

    async def _send_pending(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        charge: int,
        partition: int | None,
        timestamp_ms: int,
        txn_round: int,
    ) -> DeliveryFuture:
        """send() to a topic whose metadata is not known (or that has records waiting
        for it): the record waits in the topic's pending queue, charged to
        buffer_memory, and its handle is returned at once. The first such record starts
        the task that waits for the metadata (every topic pending in the same loop
        pass is asked for in one Metadata request), then places them in send order."""
        if partition is not None:
            partition = _checked_partition(partition)
        if topic not in self._pending and (
            _LEGAL_TOPIC.fullmatch(topic) is None or topic in (".", "..")
        ):
            raise InvalidTopicError(
                f"topic {topic!r} is not a legal topic name: 1 to 249 of a-z, A-Z, 0-9, "
                "'.', '_' and '-' (and not '.' or '..')"
            )
        acc = self._acc
        if acc.used + self._reserved + charge > acc.limit or self._space_queue:
            await self._wait_for_space(charge)
            if not self._accepting or txn_round != self._txn_round:
                self._check_after_wait(txn_round)
        # no suspension from here to the append
        self._reserved += charge
        pt = self._pending.get(topic)
        if pt is None:
            loop = asyncio.get_running_loop()
            if self._pending_gate is None:
                self._pending_gate = gate = loop.create_future()
                loop.call_later(_PENDING_WINDOW_S, self._open_pending_gate, gate)
            pt = self._pending[topic] = PendingTopic(topic, loop)
            self._topics.pop(topic, None)  # send()'s fast path must not overtake them
            pt.task = loop.create_task(self._drain_pending(pt), name="aiokproto-pending-topic")
        return pt.add(timestamp_ms, key, value, headers, charge, partition, txn_round)

    def _open_pending_gate(self, gate: asyncio.Future[None]) -> None:
        if self._pending_gate is gate:
            self._pending_gate = None
        gate.set_result(None)

    async def _drain_pending(self, pt: PendingTopic) -> None:
        """Wait (up to max_block_ms) for ``pt``'s topic, then place its records; on an
        error, fail them with it."""
        topic = pt.topic
        try:
            # a short window first: a handler that yields between sends to new topics
            # meets them one loop pass apart; every topic that became pending in the
            # window starts its lookup in the same pass, so they share one request
            gate = self._pending_gate
            if gate is not None:
                await asyncio.shield(gate)
            ts = await self._topic_state(topic, sending=False, pending=True)
        except BaseException as exc:
            if self._pending.get(topic) is pt:
                del self._pending[topic]
            if isinstance(exc, KafkaError):
                self._release_pending(pt, exc)
                self._pending_failed(exc)
                return
            # cancelled (_fail_pending failed the records first), or a bug
            self._release_pending(pt, KafkaError(f"the record's topic lookup failed: {exc!r}"))
            raise
        # no suspension from here: every record is placed before any later send()
        del self._pending[topic]
        self._place_pending(pt, ts)
        self._topics[topic] = ts

    def _place_pending(self, pt: PendingTopic, ts: _TopicState) -> None:
        """Choose each record's partition (keyed: murmur2 over the partition count now
        known; keyless: sticky) and append it, in send order."""
        acc = self._acc
        loop = asyncio.get_running_loop()
        places = []
        late: KafkaError | None = None
        self._reserved -= pt.charge
        pt.charge = 0
        for timestamp, key, value, headers, charge, partition, txn_round in pt.records:
            pq: PartitionQueue | None
            try:
                if txn_round != self._txn_round or (
                    self._txn is not None and self._txn.state.state is not Txn.IN_TRANSACTION
                ):
                    raise IllegalStateError(
                        f"the transaction this record was sent in (number {txn_round}) "
                        "ended before its topic's metadata was known: not sent"
                    )
                if partition is not None:
                    pq = ts.queues.get(partition)
                    if pq is None:
                        raise UnknownTopicOrPartitionError(
                            f"topic {ts.name!r} has no partition {partition} (it has "
                            f"{ts.count} partitions)"
                        )
                else:
                    pq = self._queue_for(ts, key, charge)
            except Exception as exc:  # KafkaError, or a custom partitioner's own
                error = exc if isinstance(exc, KafkaError) else KafkaError(
                    f"choosing the record's partition raised {exc!r}"
                )
                late = late or error
                places.append(failed_place(ts.name, error, loop))
                continue
            if not pq.txn_added:
                self._track(pq)
            handle = acc.append(pq, timestamp, key, value, headers, charge)
            batch = handle.batch
            assert batch is not None
            places.append((batch, handle._delta))
        pt.settle(places)
        self._grant_space()
        if late is not None:
            self._pending_failed(late)

    def _pending_failed(self, error: KafkaError) -> None:
        """Records of a transaction failed before they were buffered: it cannot commit
        (as when one of its batches fails)."""
        if self._txn is not None and self._txn.state.state is Txn.IN_TRANSACTION:
            self._txn.records_failed(error)

    def _release_pending(self, pt: PendingTopic, error: BaseException) -> None:
        self._reserved -= pt.charge
        pt.charge = 0
        pt.fail(error)
        if self._acc is not None:
            self._grant_space()

    def _fail_pending(self, error: KafkaError) -> int:
        """Fail every record still waiting for its topic's metadata; their count."""
        pending, self._pending = self._pending, {}
        count = 0
        for pt in pending.values():
            count += len(pt)
            self._release_pending(pt, error)
            if pt.task is not None:
                pt.task.cancel()
        return count

    async def _wait_pending(self, timeout_s: float | None) -> bool:
        """Wait until every record sent so far to a topic without metadata is placed
        or failed; False if some still wait after ``timeout_s``."""
        tasks = [pt.task for pt in self._pending.values() if pt.task is not None]
        if not tasks:
            return True
        _, waiting = await asyncio.wait(tasks, timeout=timeout_s)
        return not waiting

    async def _topic_state_after_pending(self, topic: str) -> _TopicState:
        """``_topic_state`` for a call that buffers records itself (send_batch): once
        the records sent to the topic before it are placed (they go first)."""
        while topic.__class__ is str and topic in self._pending:
            task = self._pending[topic].task
            assert task is not None
            await asyncio.wait((task,))
        return await self._topic_state(topic)

    async def _wait_tracked(
        self, meta: MetadataCache, known: Callable[[ClusterSnapshot], bool]
    ) -> ClusterSnapshot:
        """``meta.wait_for`` without asking again at every new snapshot: the topic is
        tracked, so the cache asked for it (and polls it while it is unusable). With
        hundreds of topics pending, each asking again whenever an answer about others
        came named most of them in two or three requests."""
        try:
            async with asyncio.timeout(self._max_block):
                while not known(meta.snapshot):
                    await meta.next_change()
        except TimeoutError:
            raise KafkaTimeoutError("the topic did not appear") from None
        return meta.snapshot

    def _keep(self, topic: str) -> None:
        """The producer's own hold on ``topic`` in the metadata, taken once; taken again
        after a wait if the idle sweep dropped it meanwhile."""
        if topic not in self._kept:
            assert self._client is not None
            self._client.metadata.track([topic])
            self._kept[topic] = asyncio.get_running_loop().time()

    def _expire_idle_topics(self) -> None:
        """Forget topics not sent to for ``metadata_max_idle_ms`` (Java's
        ``metadata.max.idle.ms``) and with nothing buffered or in flight: a deleted or
        one-off topic leaves the metadata requests and the per-topic metrics. A later
        send() looks it up again. Partition queues stay: they hold sequence numbers."""
        acc, client = self._acc, self._client
        if not self._running or acc is None or client is None:
            return
        now = asyncio.get_running_loop().time()
        idle = self.options.metadata_max_idle_ms / 1000
        for topic, used in list(self._kept.items()):
            queues = acc.queues.get(topic, {}).values()
            last = max([used, *(pq.last_batch for pq in queues)])
            if now - last < idle or any(
                pq.batches or pq.in_flight or pq.unresolved for pq in queues
            ):
                continue
            del self._kept[topic]
            client.metadata.untrack([topic])
            self._topics.pop(topic, None)
            self._sticky.pop(topic, None)
            self._metrics.forget_topic(topic)
            log.debug("topic %r idle for %.0f s: dropped from the producer's metadata", topic, idle)
        self._schedule_idle_sweep()

    def _schedule_idle_sweep(self) -> None:
        idle = self.options.metadata_max_idle_ms / 1000
        loop = asyncio.get_running_loop()
        self._idle_timer = loop.call_later(min(idle / 2, 60.0), self._expire_idle_topics)

    async def _partition_queue(self, ts: _TopicState, partition: Any) -> PartitionQueue:
        partition = _checked_partition(partition)
        pq = ts.queues.get(partition)  # an int subclass (IntEnum) of a known partition
        if pq is not None:
            return pq
        assert self._client is not None
        # a refresh asked for now (an answer already on the wire may predate the
        # partition), given up at once if the producer is stopped meanwhile
        refresh = asyncio.ensure_future(self._client.metadata.refresh())
        stopped = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait(
                (refresh, stopped), timeout=self._max_block, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopped.cancel()
            if refresh.done():
                if not refresh.cancelled():
                    refresh.exception()  # failed: the look-up below says what is known
            else:
                refresh.cancel()
        if not self._accepting:
            self._check_running()
        fresh = await self._topic_state(ts.name)
        pq = fresh.queues.get(partition)
        if pq is None:
            raise UnknownTopicOrPartitionError(
                f"topic {ts.name!r} has no partition {partition} (it has {fresh.count} partitions)"
            )
        return pq

    def _too_large(self, topic: str, charge: int) -> RecordTooLargeError:
        # the bound it was checked against: a batch of it alone at the worst-case framing
        size = charge + BATCH_HEADER + RECORD_OVERHEAD_BOUND
        return RecordTooLargeError(
            f"a record needing a batch of up to {size} bytes for topic {topic!r} is larger than "
            f"max_request_size ({self.options.max_request_size}) or buffer_memory "
            f"({self.options.buffer_memory}); raise those, or send smaller records"
        )

    # -- buffer memory --------------------------------------------------------------

    async def _wait_for_space(self, charge: int) -> None:
        """Wait, in FIFO order, until ``charge`` bytes of ``buffer_memory`` are reserved
        for this call (a charge above the limit: until the buffer is empty). The caller
        appends right after, without suspending, and gives the reservation back.

        First come, first served, as in Java's buffer pool: otherwise every release
        would go to whichever small send ran first and a large call could starve."""
        acc, sender = self._acc, self._sender
        assert acc is not None and sender is not None
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry = _SpaceWait(charge, waiter)
        self._space_queue.append(entry)
        acc.space_wanted = True  # buffered batches are sent without lingering
        sender.wake()
        self._grant_space()
        try:
            async with asyncio.timeout(self._max_block):
                await waiter
        except BaseException as exc:
            # gave up (max_block_ms, cancelled, stopped): leave the queue, and give a
            # reservation made meanwhile to the next in line
            if entry in self._space_queue:
                self._space_queue.remove(entry)
            if entry.granted:
                self._reserved -= charge
            if not waiter.done():
                waiter.cancel()
            acc.space_wanted = bool(self._space_queue)
            self._grant_space()
            if isinstance(exc, TimeoutError):
                held = {t: pt.charge for t, pt in self._pending.items() if pt.charge}
                why = (
                    f"; {sum(held.values())} bytes are held by records waiting for the "
                    f"metadata of {', '.join(map(repr, list(held)[:5]))}"
                    f"{' and others' if len(held) > 5 else ''} (they fail after "
                    "max_block_ms if it does not come)"
                    if held
                    else ""
                )
                blame = (
                    "records wait for their topic's metadata" if held
                    else "the brokers do not keep up or are unreachable"
                )
                raise KafkaTimeoutError(
                    f"buffer_memory ({acc.limit} bytes) stayed full for "
                    f"{self.options.max_block_ms} ms (max_block_ms): {blame}; "
                    f"{acc.used} bytes are buffered in {acc.unsent_or_in_flight()} "
                    f"batch(es){why}"
                ) from None
            raise
        # Granted: the caller appends right away, without suspending, so the reserved
        # bytes become used ones before anything else can run.
        self._reserved -= charge
        acc.space_wanted = bool(self._space_queue)
        if not self._accepting:
            self._check_running()

    def _grant_space(self) -> None:
        """Reserve memory for the waiters at the head of the queue, in order."""
        acc = self._acc
        queue = self._space_queue
        while queue:
            head = queue[0]
            if head.future.done():
                queue.popleft()
                continue
            busy = acc.used + self._reserved
            if busy + head.charge > acc.limit and busy > 0:
                return
            queue.popleft()
            head.granted = True
            self._reserved += head.charge
            head.future.set_result(None)

    def _space_released(self) -> None:
        if self._space_queue:
            self._grant_space()

    def _fail_space_waiters(self, error: KafkaError) -> None:
        for entry in self._space_queue:
            if not entry.future.done():
                entry.future.set_exception(error)
                entry.future.exception()  # its caller may have been cancelled meanwhile
        self._space_queue.clear()


class _SpaceWait:
    """One call waiting for buffer memory (FIFO)."""

    __slots__ = ("charge", "future", "granted")

    def __init__(self, charge: int, future: asyncio.Future[None]) -> None:
        self.charge = charge
        self.future = future
        self.granted = False


# send() as defined here, whatever wraps Producer.send later (the OpenTelemetry
# instrumentor): its on_delivery path calls this, so a wrapper sees one call
_KEY, _VALUE = MessageField.KEY, MessageField.VALUE
_send = Producer.send

# send()'s common case compiled (None in the pure build): the C code reads and writes
# these classes' __slots__ at their offsets, checked against the classes bound here
_send_fast: Callable[[Producer[Any, Any], Any, Any, Any, Any], DeliveryFuture | None] | None = None
if _native is not None:
    _native.bind_send(
        Producer,
        _TopicState,
        StickyPartitioner,
        Accumulator,
        PartitionQueue,
        ProducerBatch,
        DeliveryFuture,
        RECORD_CHARGE,
    )
    _send_fast = _native.send_fast
