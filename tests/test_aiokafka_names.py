"""aiokafka's error names: code moving from aiokafka keeps its imports and ``except``s."""

from __future__ import annotations

import copy
import inspect
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import aiokproto
from aiokproto import errors
from aiokproto.consumer import errors as consumer_errors
from aiokproto.errors import (
    BootstrapError,
    CommitFailedError,
    ConsumerStoppedError,
    CorruptRecordError,
    IllegalOperation,
    InvalidMessageError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NoGroupError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    ProducerFenced,
    RecordTooLargeError,
    for_code,
)
from aiokproto.structs import TopicPartition
from tools.codegen import gen_errors

ROOT = Path(__file__).resolve().parents[1]


def test_the_consumer_errors_are_one_class_wherever_they_are_imported_from() -> None:
    assert consumer_errors.ConsumerStoppedError is ConsumerStoppedError
    assert consumer_errors.NoOffsetForPartitionError is NoOffsetForPartitionError
    assert consumer_errors.NoGroupError is NoGroupError
    from aiokproto.consumer.group import CommitFailedError as from_group

    assert from_group is CommitFailedError
    assert aiokproto.ConsumerStoppedError is ConsumerStoppedError
    from aiokproto.consumer import CommitFailedError as from_consumer

    assert from_consumer is CommitFailedError


def test_errors_module_imports_only_its_hand_written_families() -> None:
    # errors.py is loaded with an empty aiokproto package (its __init__ not run): had
    # it or error_families.py imported the consumer (a cycle), more aiokproto modules
    # would be in sys.modules afterwards.
    code = (
        "import importlib.util, sys, types\n"
        "pkg = types.ModuleType('aiokproto'); pkg.__path__ = ['aiokproto']\n"
        "sys.modules['aiokproto'] = pkg\n"
        "spec = importlib.util.spec_from_file_location('errors', 'aiokproto/errors.py')\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "assert mod.CommitFailedError and mod.ConsumerStoppedError and mod.BootstrapError\n"
        "print(sorted(m for m in sys.modules if m.startswith('aiokproto')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == "['aiokproto', 'aiokproto.error_families']"


def test_errors_offers_every_hand_written_class_and_all_its_public_names() -> None:
    from aiokproto import error_families

    for name in gen_errors.family_names():
        assert getattr(errors, name) is getattr(error_families, name), name
        assert name in errors.__all__
    public = {n for n, v in vars(errors).items() if not n.startswith("_") and n != "annotations"}
    assert set(errors.__all__) == public
    for code, cls in errors.ERROR_CLASSES.items():
        assert issubclass(cls, error_families.BrokerResponseError) and cls.errno == code


def test_message_size_too_large_catches_what_aiokafka_raised_under_that_name() -> None:
    # aiokafka: a record over max_request_size on send(), and broker code 10.
    assert MessageSizeTooLargeError is RecordTooLargeError
    for raised in (
        RecordTooLargeError("record over max_request_size"),
        for_code(10)(),
        for_code(18)(),
    ):
        with pytest.raises(MessageSizeTooLargeError):
            raise raised
    assert not issubclass(for_code(1), MessageSizeTooLargeError)


def test_invalid_message_catches_corrupt_records_from_either_side() -> None:
    # aiokafka: CORRUPT_MESSAGE from the broker and a bad CRC read by the client.
    assert InvalidMessageError is CorruptRecordError
    broker = for_code(2)("x")
    assert isinstance(broker, InvalidMessageError) and isinstance(broker, KafkaProtocolError)
    assert broker.errno == 2 and broker.retriable  # still the broker code's class
    assert isinstance(CorruptRecordError("bad CRC"), InvalidMessageError)
    assert not CorruptRecordError.retriable


def test_producer_fenced_and_illegal_operation() -> None:
    assert ProducerFenced is for_code(90)
    assert not issubclass(for_code(47), ProducerFenced)  # INVALID_PRODUCER_EPOCH stays apart
    assert IllegalOperation is NoGroupError


def test_out_of_range_consumer_error_is_aiokafka_shaped() -> None:
    tp, other = TopicPartition("t", 0), TopicPartition("a", 3)
    err = consumer_errors.OffsetOutOfRangeConsumerError({tp: 5, other: 9})
    # aiokafka: except OffsetOutOfRangeError as e: e.args[0] is {tp: offset}
    assert isinstance(err, OffsetOutOfRangeError) and isinstance(err, NoOffsetForPartitionError)
    assert err.args == ({tp: 5, other: 9},)
    assert err.offsets == {tp: 5, other: 9} and err.partitions == {tp, other}
    assert err.errno == 1 and not err.retriable
    assert str(err).startswith("the position is out of range (a-3@9, t-0@5)")
    for clone in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
        assert type(clone) is type(err)
        assert clone.offsets == err.offsets and str(clone) == str(err)
    with pytest.raises(OffsetOutOfRangeError) as info:
        raise err
    assert info.value.args[0][tp] == 5


def test_bootstrap_error_is_a_connection_error_and_a_timeout() -> None:
    err = BootstrapError("x")
    assert isinstance(err, KafkaConnectionError) and isinstance(err, KafkaTimeoutError)
    assert isinstance(err, TimeoutError) and err.retriable


def test_the_generator_refuses_an_alias_of_a_class_it_does_not_define(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(gen_errors.AIOKAFKA_ALIASES, "Bogus", ("NoSuchError", "why"))
    with pytest.raises(SystemExit, match="NoSuchError"):
        gen_errors.render(ROOT / "tools" / "codegen" / "specs" / "errors.tsv")


def test_same_names_as_aiokafka_mean_the_same_broker_code() -> None:
    aiokafka_errors = pytest.importorskip("aiokafka.errors")
    shared = 0
    for name, theirs in vars(aiokafka_errors).items():
        ours = getattr(errors, name, None)
        errno = getattr(theirs, "errno", None)
        if not isinstance(ours, type) or not isinstance(errno, int) or errno <= 0:
            continue
        shared += 1
        assert issubclass(for_code(errno), ours), (name, errno, ours)
    assert shared > 30  # most of aiokafka's broker names are ours too


def test_every_name_the_migration_needs_is_in_aiokproto_errors() -> None:
    for name in (
        "CommitFailedError",
        "ConsumerStoppedError",
        "IllegalOperation",
        "IllegalStateError",
        "InvalidMessageError",
        "KafkaConnectionError",
        "KafkaError",
        "KafkaTimeoutError",
        "MessageSizeTooLargeError",
        "NoOffsetForPartitionError",
        "OffsetOutOfRangeError",
        "ProducerFenced",
        "RecordTooLargeError",
        "TopicAuthorizationFailedError",
        "UnknownTopicOrPartitionError",
    ):
        assert issubclass(getattr(errors, name), errors.KafkaError), name


def test_every_aiokafka_errors_name_but_the_readme_s_few_is_ours() -> None:
    """aiokafka's api.rst documents every member of aiokafka.errors; after the rename
    `from aiokproto.errors import ProducerClosed` (NodeNotReadyError,
    NotLeaderForPartitionError, ...) must work. The few left out on purpose are the
    generator's AIOKAFKA_NOT_PROVIDED, and the README names each of them."""
    aiokafka_errors = pytest.importorskip("aiokafka.errors")
    names = {
        n
        for n, v in vars(aiokafka_errors).items()
        if inspect.isclass(v) and issubclass(v, BaseException) and v.__module__ == "aiokafka.errors"
    }
    missing = {n for n in names if not hasattr(errors, n)}
    assert missing == set(gen_errors.AIOKAFKA_NOT_PROVIDED)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Migrating from aiokafka") : readme.index("## Layout")]
    assert "every name in `aiokafka.errors` is in `aiokproto.errors`, except seven" in section
    assert len(missing) == 7
    for name in missing:
        assert f"`{name}`" in section, name
    for name in names - missing:  # each is an error class aiokproto raises
        assert issubclass(getattr(errors, name), errors.KafkaError), name


def test_aiokafka_structs_names_are_in_aiokproto_structs() -> None:
    """aiokafka's API docs list aiokafka.structs.RecordMetadata, ConsumerRecord and
    OffsetAndTimestamp; the README maps `.structs` to aiokproto.structs."""
    from aiokproto.structs import ConsumerRecord, OffsetAndTimestamp, RecordMetadata

    assert ConsumerRecord is aiokproto.ConsumerRecord
    assert OffsetAndTimestamp is aiokproto.OffsetAndTimestamp
    assert RecordMetadata is aiokproto.RecordMetadata


def test_aiokafka_top_level_illegal_operation() -> None:
    """aiokafka exports IllegalOperation at top level (`from aiokafka import
    IllegalOperation`)."""
    assert getattr(aiokproto, "IllegalOperation", None) is NoGroupError


@pytest.mark.parametrize(
    "make",
    [
        lambda: NoOffsetForPartitionError([TopicPartition("t", 0)], "no position"),
        lambda: consumer_errors.RecordDeserializationError(
            TopicPartition("t", 0), 3, ValueError("bad")
        ),
        lambda: errors.UnknownTopicOrPartitionError("topic t"),
        lambda: errors.UnknownTopicOrPartitionError(),
    ],
    ids=["NoOffsetForPartitionError", "RecordDeserializationError", "broker", "broker-bare"],
)
def test_errors_survive_pickling_and_copying_unchanged(
    make: Callable[[], errors.KafkaError],
) -> None:
    """Errors cross process boundaries (ProcessPoolExecutor, multiprocessing logging):
    args are the constructor's arguments, so pickle and copy rebuild the same error
    (a broker error's "[Error N] Name: description" prefix is not doubled)."""
    e = make()
    for clone in (pickle.loads(pickle.dumps(e)), copy.copy(e), copy.deepcopy(e)):
        assert type(clone) is type(e)
        assert str(clone) == str(e)
    assert str(e).count("[Error") <= 1
