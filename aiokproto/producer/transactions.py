"""The transaction manager (``TransactionManager``): a transactional producer's requests
to its transaction coordinator (and, for offsets, to the group coordinator):
InitProducerId with the transactional id, AddPartitionsToTxn (v1), AddOffsetsToTxn and
TxnOffsetCommit, EndTxn (v2: a new epoch), the v1 epoch bump after an abort.

``TxnState`` (pure) says what is allowed; this module does the I/O: InitProducerId
with the transactional id, AddPartitionsToTxn (transactions v1: a partition's batches
wait until it is added), AddOffsetsToTxn + TxnOffsetCommit, EndTxn. Under
transactions v2 (KIP-890, the cluster's ``transaction.version`` >= 2) Produce adds
partitions implicitly and EndTxn answers with the epoch of the next transaction.

Every call is bounded by ``max_block_ms``. A commit or abort that timed out keeps its
state (COMMITTING, ABORTING): calling it again resends the same EndTxn, which the
coordinator accepts again, so the outcome is never a silent "maybe".
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokproto.cluster.client import ClusterClient
from aiokproto.cluster.coordinators import GROUP, TRANSACTION
from aiokproto.cluster.snapshot import ZERO_UUID
from aiokproto.config import ClientConfig
from aiokproto.errors import (
    CommitFailedError,
    ConcurrentTransactionsError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    IllegalStateError,
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OperationNotAttemptedError,
    StaleMemberEpochError,
    TransactionAbortedError,
    UnknownMemberIdError,
    UnknownTopicIdError,
    for_code,
)
from aiokproto.producer.accumulator import Accumulator
from aiokproto.producer.batch import PartitionQueue, ProducerBatch, ProducerIdentity
from aiokproto.producer.options import ProducerOptions
from aiokproto.producer.sender import backoff_s
from aiokproto.producer.txn_state import Kind, Txn, TxnState, classify, produce_error_is_fatal
from aiokproto.protocol.base import Request
from aiokproto.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from aiokproto.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from aiokproto.protocol.messages.end_txn import EndTxnRequest
from aiokproto.protocol.messages.init_producer_id import InitProducerIdRequest
from aiokproto.protocol.messages.produce import ProduceRequest
from aiokproto.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from aiokproto.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

#: the cluster feature that turns transactions v2 on (KIP-890), and its level
TV_FEATURE = "transaction.version"
_TV2 = 2
#: clients use AddPartitionsToTxn v3 and below (v4+ is broker to broker)
_ADD_PARTITIONS_MAX = 3
#: EndTxn v5+ and TxnOffsetCommit v5+ are the transactions v2 forms
_END_TXN_V1_MAX = 4
_TXN_OFFSET_COMMIT_V1_MAX = 4
#: TxnOffsetCommit v6+ names topics by id only (KIP-1319, Kafka 4.4)
_TXN_OFFSET_COMMIT_NAMES_MAX = 5
#: CONCURRENT_TRANSACTIONS right after a commit clears within milliseconds: retry
#: AddPartitionsToTxn soon rather than after the full back-off (as Java does)
_ADD_PARTITIONS_RETRY_S = 0.02
_CONCURRENT_TRANSACTIONS = ConcurrentTransactionsError.errno
_UNKNOWN_TOPIC_ID = UnknownTopicIdError.errno
_FAST_RETRIES = 10
# v6 answers GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH where older versions answered
# ILLEGAL_GENERATION: all mean the group moved past this member (Java: CommitFailed)
_MEMBER_ERRORS = frozenset(
    {
        UnknownMemberIdError.errno,
        IllegalGenerationError.errno,
        FencedInstanceIdError.errno,
        GroupIdNotFoundError.errno,
        StaleMemberEpochError.errno,
    }
)


class TransactionManager:
    """One transactional producer's transaction state and coordinator requests."""

    def __init__(
        self,
        client: ClusterClient,
        acc: Accumulator,
        options: ProducerOptions,
        config: ClientConfig,
        wake_sender: Callable[[], None],
        on_fatal: Callable[[KafkaError], None],
        on_abortable: Callable[[KafkaError], None] | None = None,
    ) -> None:
        assert options.transactional_id is not None
        self.transactional_id = options.transactional_id
        self.state = TxnState()
        self.v2 = False
        self._client = client
        self._acc = acc
        self._opts = options
        self._config = config
        self._wake_sender = wake_sender
        self._on_fatal = on_fatal
        self._on_abortable = on_abortable  # the transaction just turned abortable
        self._loop = asyncio.get_running_loop()
        self._to_add: dict[PartitionQueue, None] = {}  # v1: used, not yet added
        self._added: set[PartitionQueue] = set()
        self._groups_added: set[str] = set()  # AddOffsetsToTxn done in this transaction
        # a request that may have opened the transaction at the coordinator went out
        # (answered or not): the transaction then needs an EndTxn
        self._touched = False
        self._add_wanted = asyncio.Event()
        self._add_task: asyncio.Task[None] | None = None
        self._add_lock = asyncio.Lock()  # held while an AddPartitionsToTxn is out
        self._ending: asyncio.Task[None] | None = None  # the EndTxn being sent
        acc.on_fail = self._batch_failed

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        """InitProducerId through the transaction coordinator (fencing any earlier
        producer with this transactional id), and learn the transactions version."""
        self.state.move(Txn.INITIALIZING)
        try:
            identity = await self._init_producer_id(self._acc.identity)
        except KafkaError as exc:
            self._fatal(exc)
            raise
        self._acc.set_identity(identity)
        self._acc.add_partitions = not self.v2
        self.state.move(Txn.READY)
        self._add_task = self._loop.create_task(self._add_loop(), name="aiokproto-txn-add")
        log.info(
            "transactional id %r: producer id %s epoch %s (transactions v%d)",
            self.transactional_id,
            identity.producer_id,
            identity.epoch,
            2 if self.v2 else 1,
        )

    async def close(self, timeout_s: float = 0.0) -> None:
        """Stop the tasks; an EndTxn in progress first gets up to ``timeout_s``."""
        if self._ending is not None and not self._ending.done() and timeout_s > 0:
            await asyncio.wait({self._ending}, timeout=timeout_s)
        tasks = [t for t in (self._add_task, self._ending) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._add_task = self._ending = None

    # -- what the producer calls ------------------------------------------------------

    def begin(self) -> None:
        self.state.check("begin_transaction")
        self.state.move(Txn.IN_TRANSACTION)
        self._to_add.clear()
        self._added.clear()
        self._groups_added.clear()
        self._touched = False
        self._acc.sent_in_txn = False
        self._acc.doomed = None
        if not self.v2:
            for pq in self._acc.partition_queues():
                pq.txn_added = False

    def track(self, pq: PartitionQueue) -> None:
        """A record is about to go to ``pq``, which the transaction has not added yet."""
        if pq not in self._added and pq not in self._to_add:
            self._to_add[pq] = None
            self._add_wanted.set()

    async def send_offsets(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group: ConsumerGroupMetadata,
    ) -> None:
        self.state.check("send_offsets_to_transaction")
        deadline = self._deadline()
        self._touched = True
        try:
            if not self.v2 and group.group_id not in self._groups_added:
                await self._call(
                    "AddOffsetsToTxn",
                    lambda identity: AddOffsetsToTxnRequest(
                        transactional_id=self.transactional_id,
                        producer_id=identity.producer_id,
                        producer_epoch=identity.epoch,
                        group_id=group.group_id,
                    ),
                    lambda r: r.error_code,
                    deadline,
                )
                self._groups_added.add(group.group_id)
            await self._txn_offset_commit(offsets, group, deadline)
        except KafkaError as exc:
            self._fail_with(exc)
            raise

    async def commit(self, flush: Callable[[], Any]) -> None:
        """Flush, then EndTxn(commit); the state is READY again only once the
        coordinator confirmed it."""
        self.state.check("commit_transaction")
        if self.state.state is Txn.IN_TRANSACTION:
            self.state.move(Txn.COMMITTING)
        await flush()  # every record of the transaction is delivered or failed
        if self.state.state is not Txn.COMMITTING:
            self.state.check("commit_transaction")  # a batch failed: abortable
        await self._end(committed=True)

    async def abort(self, wait_in_flight: Callable[[], Awaitable[bool]]) -> None:
        """Drop what is not sent yet, let what is out finish, then EndTxn(abort)."""
        self.state.check("abort_transaction")
        if self.state.state is not Txn.ABORTING:
            self.state.move(Txn.ABORTING)
        aborted = TransactionAbortedError(
            f"transaction of {self.transactional_id!r} aborted before the record was sent"
        )
        self._acc.doomed = aborted  # a batch split or retried from now on fails too
        self._acc.fail_unsent(aborted)
        self._to_add.clear()
        if not await wait_in_flight():
            # EndTxn must not overtake batches still out (the markers would come
            # before them): the abort stays pending, calling it again finishes it
            raise KafkaTimeoutError(
                f"abort_transaction: batches still in flight after max_block_ms="
                f"{self._opts.max_block_ms}; call abort_transaction() again"
            )
        await self._end(committed=False)

    # -- EndTxn ---------------------------------------------------------------------

    async def _end(self, *, committed: bool) -> None:
        """EndTxn (and, v1 after an abort, a new epoch), as one task that concurrent
        callers share: a cancelled caller leaves the state COMMITTING/ABORTING, and a
        later call waits for the same request or, if it failed, sends it again."""
        async with self._add_lock:  # an AddPartitionsToTxn still out decides `needed`
            pass
        if self._ending is None or self._ending.done():
            self._ending = self._loop.create_task(self._finish(committed), name="aiokproto-txn-end")
        ending = self._ending
        try:
            await asyncio.shield(ending)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if ending.cancelled() and (task is None or not task.cancelling()):
                # close() cut it short; this caller was not cancelled
                raise IllegalStateError(
                    "the Producer was stopped before the transaction ended: the "
                    "coordinator decides (aborted, unless the commit had reached it)"
                ) from None
            raise

    async def _finish(self, committed: bool) -> None:
        needed = self._acc.sent_in_txn or bool(self._added) or self._touched
        if needed:
            await self._end_txn(committed)
            if not committed and not self.v2:
                await self._bump_epoch()
        if self.state.state in (Txn.COMMITTING, Txn.ABORTING):
            self.state.move(Txn.READY)

    async def _end_txn(self, committed: bool) -> None:
        what = "EndTxn(commit)" if committed else "EndTxn(abort)"
        try:
            response = await self._call(
                what,
                lambda identity: EndTxnRequest(
                    transactional_id=self.transactional_id,
                    producer_id=identity.producer_id,
                    producer_epoch=identity.epoch,
                    committed=committed,
                ),
                # an abort the coordinator has no open transaction for has nothing
                # to do (a request that may have opened one timed out unanswered)
                (lambda r: r.error_code)
                if committed
                else (lambda r: 0 if r.error_code == InvalidTxnStateError.errno else r.error_code),
                self._deadline(),
                max_version=None if self.v2 else _END_TXN_V1_MAX,
                # v2: the coordinator aborted the transaction itself (it outlived
                # transaction_timeout_ms) and moved to the next epoch; an abort with
                # ours is taken as a retry of that abort, so the producer goes on
                overrides={InvalidTxnStateError.errno: Kind.ABORTABLE}
                if committed and self.v2
                else None,
            )
        except KafkaError as exc:
            if committed and self.state.state is Txn.COMMITTING:
                if isinstance(exc, InvalidTxnStateError):
                    timed_out = InvalidTxnStateError(
                        f"{what}: the coordinator has no open transaction to commit: it "
                        "aborted it, most likely because it outlived transaction_timeout_ms"
                        f"={self._opts.transaction_timeout_ms}; abort_transaction() and "
                        "go on"
                    )
                    self._fail_with(timed_out)
                    raise timed_out from exc
                if not isinstance(exc, KafkaTimeoutError):
                    self._fail_with(exc)
            raise
        if self.v2 and response.producer_id >= 0:
            # v2: every transaction ends with a new epoch, and sequences start over
            self._acc.set_identity(ProducerIdentity(response.producer_id, response.producer_epoch))
            self._wake_sender()

    async def _bump_epoch(self) -> None:
        """v1, after an abort: a new epoch, so no partition's sequence numbering has
        to continue past batches the broker never saw (KIP-360)."""
        try:
            identity = await self._init_producer_id(self._acc.identity)
        except KafkaError as exc:
            self._fatal(exc)
            raise
        self._acc.set_identity(identity)
        self._wake_sender()

    # -- AddPartitionsToTxn (v1) ------------------------------------------------------

    async def _add_loop(self) -> None:
        try:
            while True:
                await self._add_wanted.wait()
                self._add_wanted.clear()
                if self._to_add and self.state.state in (Txn.IN_TRANSACTION, Txn.COMMITTING):
                    async with self._add_lock:
                        await self._add_partitions()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug: surface it on the next call, never hang
            log.exception("the transaction's AddPartitionsToTxn task failed")
            error = KafkaError(f"AddPartitionsToTxn failed unexpectedly: {exc!r}")
            error.__cause__ = exc
            self._fatal(error)

    async def _add_partitions(self) -> None:
        pending = list(self._to_add)
        by_topic: dict[str, list[int]] = {}
        for pq in pending:
            by_topic.setdefault(pq.topic, []).append(pq.partition)

        def codes(response: Any) -> int:
            if response.error_code:
                return int(response.error_code)
            found = [
                (t.name, p.partition_index, p.partition_error_code)
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
            ]
            errors: list[int] = [int(c) for _, _, c in found if c]
            if errors:
                # the worst decides: fatal, then abortable, then retriable; the
                # partitions not at fault only answer OPERATION_NOT_ATTEMPTED
                order = {Kind.FATAL: 0, Kind.ABORTABLE: 2, Kind.COORDINATOR_MOVED: 4}
                return min(
                    errors,
                    key=lambda c: (
                        order.get(classify(c), 6) + (c == OperationNotAttemptedError.errno)
                    ),
                )
            answered = {(t, p) for t, p, _ in found}
            missing = [pq for pq in pending if (pq.topic, pq.partition) not in answered]
            if missing:
                return -1
            return 0

        self._touched = True
        try:
            await self._call(
                "AddPartitionsToTxn",
                lambda identity: AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=identity.producer_id,
                    v3_and_below_producer_epoch=identity.epoch,
                    v3_and_below_topics=[
                        AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()
                    ],
                ),
                codes,
                self._deadline(),
                max_version=_ADD_PARTITIONS_MAX,
                retry_s=_ADD_PARTITIONS_RETRY_S,
            )
        except KafkaError as exc:
            self._fail_with(exc)
            self._acc.fail_unsent(exc, pending)
            for pq in pending:
                self._to_add.pop(pq, None)
            self._wake_sender()
            return
        for pq in pending:
            self._to_add.pop(pq, None)
            self._added.add(pq)
            pq.txn_added = True
        self._wake_sender()
        if self._to_add:
            self._add_wanted.set()

    # -- TxnOffsetCommit ----------------------------------------------------------------

    async def _txn_offset_commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        group: ConsumerGroupMetadata,
        deadline: float,
    ) -> None:
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for tp, value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            by_topic.setdefault(tp.topic, []).append(
                TxnOffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )

        def codes(response: Any) -> int:
            errors: list[int] = [
                int(p.error_code) for t in response.topics for p in t.partitions if p.error_code
            ]
            if any(c in _MEMBER_ERRORS for c in errors):
                return next(c for c in errors if c in _MEMBER_ERRORS)
            if _UNKNOWN_TOPIC_ID in errors:
                # v6: the topic was re-created under its name; the retry takes its new id
                self._client.metadata.request_refresh()
            return errors[0] if errors else 0

        def topic_ids() -> dict[str, uuid.UUID]:
            snap = self._client.metadata.snapshot
            return {t: snap.topics[t].topic_id if t in snap.topics else ZERO_UUID for t in by_topic}

        # v6 (KIP-1319) needs every topic's id: the ids this producer's metadata knows
        # (the topics it writes to); any unknown one keeps the request at v5, by name,
        # as Java does.
        by_id = all(i != ZERO_UUID for i in topic_ids().values())
        cap = None if by_id else _TXN_OFFSET_COMMIT_NAMES_MAX

        def topics() -> list[TxnOffsetCommitRequestTopic]:
            ids = topic_ids()
            return [
                TxnOffsetCommitRequestTopic(name=t, topic_id=ids[t], partitions=ps)
                for t, ps in by_topic.items()
            ]

        try:
            await self._call(
                "TxnOffsetCommit",
                lambda identity: TxnOffsetCommitRequest(
                    transactional_id=self.transactional_id,
                    group_id=group.group_id,
                    producer_id=identity.producer_id,
                    producer_epoch=identity.epoch,
                    generation_id_or_member_epoch=group.generation_id,
                    member_id=group.member_id,
                    group_instance_id=group.group_instance_id,
                    topics=topics(),
                ),
                codes,
                deadline,
                coordinator=(GROUP, group.group_id),
                max_version=cap if self.v2 else _TXN_OFFSET_COMMIT_V1_MAX,
            )
        except KafkaError as exc:
            if getattr(exc, "errno", None) in _MEMBER_ERRORS:
                raise CommitFailedError(
                    f"send_offsets_to_transaction: the group {group.group_id!r} no longer "
                    f"has this member in generation {group.generation_id} ({exc}); abort "
                    "the transaction: another member owns these partitions now"
                ) from exc
            raise

    # -- requests -----------------------------------------------------------------------

    async def _init_producer_id(self, current: ProducerIdentity) -> ProducerIdentity:
        response = await self._call(
            "InitProducerId",
            lambda _identity: InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self._opts.transaction_timeout_ms,
                producer_id=current.producer_id,
                producer_epoch=current.epoch,
            ),
            lambda r: r.error_code,
            self._deadline(),
            learn_version=True,
        )
        return ProducerIdentity(response.producer_id, response.producer_epoch)

    async def _call(
        self,
        what: str,
        build: Callable[[ProducerIdentity], Request],
        code_of: Callable[[Any], int],
        deadline: float,
        *,
        coordinator: tuple[int, str] | None = None,
        max_version: int | None = None,
        retry_s: float | None = None,
        learn_version: bool = False,
        overrides: Mapping[int, Kind] | None = None,
    ) -> Any:
        """Send to the coordinator until the answer is clean, an abortable or fatal
        error (raised; a fatal one also ends the producer) or the deadline.
        ``overrides``: error code -> kind where this request differs from the rule."""
        key_type, key = coordinator or (TRANSACTION, self.transactional_id)
        coordinators = self._client.coordinators
        attempts = 0
        while True:
            attempts += 1
            kind: Kind
            code = 0
            try:
                broker = await coordinators.find(key_type, key)
                conn = await self._client.connection(broker.node_id)
                if learn_version:
                    self._learn_version(conn)
                request = build(self._acc.identity)
                version = conn.version_for(type(request))
                if max_version is not None:
                    version = min(version, max_version)
                remaining_ms = max(int((deadline - self._loop.time()) * 1000), 1)
                response = await conn.send(
                    request,
                    version,
                    timeout_ms=min(self._config.request_timeout_ms, remaining_ms) + 1000,
                )
                code = code_of(response)
                if code == 0:
                    return response
                if code == -1:
                    error: KafkaError = KafkaError(f"{what}: the answer left partitions out")
                    kind = Kind.RETRY
                else:
                    error = for_code(code)(f"{what} for transactional id {self.transactional_id!r}")
                    kind = (overrides or {}).get(code) or classify(code)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                error = exc
                kind = (
                    Kind.COORDINATOR_MOVED if isinstance(exc, KafkaConnectionError) else Kind.RETRY
                )
            if kind is Kind.FATAL:
                self._fatal(error)
                raise error
            if kind is Kind.ABORTABLE:
                raise error
            if kind is Kind.COORDINATOR_MOVED:
                coordinators.invalidate(key_type, key)
            # the short retry is for CONCURRENT_TRANSACTIONS only, and only for a while:
            # every retriable error got it, and a coordinator that kept answering so got
            # about 50 requests a second until max_block_ms
            concurrent = retry_s is not None and code == _CONCURRENT_TRANSACTIONS
            if concurrent and retry_s is not None and attempts <= _FAST_RETRIES:
                delay = retry_s
            else:  # after the fast retries, the back-off grows from retry_backoff_ms
                counted = attempts - _FAST_RETRIES if concurrent else attempts
                delay = backoff_s(self._config, counted)
            if self._loop.time() + delay >= deadline:
                raise KafkaTimeoutError(
                    f"{what} did not succeed within max_block_ms={self._opts.max_block_ms}; "
                    f"last error: {error}"
                ) from error
            await asyncio.sleep(delay)

    def _learn_version(self, conn: Any) -> None:
        level = conn.finalized_features.get(TV_FEATURE, 0)
        produce_ok = conn.api_versions.get(ProduceRequest.API_KEY, (0, 0))[1] >= 12
        end_ok = conn.api_versions.get(EndTxnRequest.API_KEY, (0, 0))[1] >= 5
        self.v2 = level >= _TV2 and produce_ok and end_ok

    # -- errors ---------------------------------------------------------------------

    def _deadline(self) -> float:
        return self._loop.time() + self._opts.max_block_ms / 1000

    def _batch_failed(self, batch: ProducerBatch, error: BaseException) -> None:
        if isinstance(error, TransactionAbortedError) or self.state.state in (
            Txn.ABORTING,
            Txn.FATAL_ERROR,
        ):
            return
        if isinstance(error, KafkaError) and produce_error_is_fatal(error):
            self._fatal(error)
            return
        kafka_error = error if isinstance(error, KafkaError) else KafkaError(str(error))
        self._fail_with(kafka_error)

    def records_failed(self, error: KafkaError) -> None:
        """Records of the transaction failed before they reached a batch (their topic
        never appeared in metadata): it cannot commit."""
        self._fail_with(error)

    def _fail_with(self, error: KafkaError) -> None:
        """The transaction cannot commit: what is not sent yet never will be."""
        if self.state.state is Txn.FATAL_ERROR:
            return
        was = self.state.state
        self.state.abortable(error)
        if self.state.state is Txn.ABORTABLE_ERROR:
            if was is not Txn.ABORTABLE_ERROR and self._on_abortable is not None:
                self._on_abortable(error)  # send() raises from now on, nobody waits
            doomed = TransactionAbortedError(
                f"not sent: the transaction failed ({type(error).__name__}: {error})"
            )
            if self._acc.doomed is None:
                self._acc.doomed = doomed  # nor are the batches that come back
            self._acc.fail_unsent(doomed)

    def _fatal(self, error: KafkaError) -> None:
        if self.state.state is Txn.FATAL_ERROR:
            return
        log.error("transactional id %r: fatal error: %s", self.transactional_id, error)
        self.state.fatal(error)
        self._on_fatal(error)
