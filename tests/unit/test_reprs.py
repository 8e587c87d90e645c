"""Every client's repr says what it is (state, client id, bootstrap, group, topics,
assignment size), cheaply, and never raises: not ``<Consumer object at 0x...>``."""

from __future__ import annotations

import re
from typing import Any

from aiokproto.admin import Admin
from aiokproto.consumer import Consumer
from aiokproto.producer import Producer
from aiokproto.share import ShareConsumer
from aiokproto.structs import TopicPartition

BS = "h1:9092,h2:9093"


def test_each_client_says_what_it_is() -> None:
    consumer = Consumer("a", "b", bootstrap_servers=BS, client_id="c1", group_id="g")
    assert repr(consumer) == (
        "<Consumer new client_id='c1' bootstrap='h1:9092,h2:9093' group_id='g' "
        "topics=['a', 'b'] assigned=0>"
    )
    alone = Consumer(bootstrap_servers=BS, client_id="c2")
    alone.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    assert repr(alone) == "<Consumer new client_id='c2' bootstrap='h1:9092,h2:9093' assigned=2>"
    by_pattern = Consumer(bootstrap_servers=BS, group_id="g")
    by_pattern.subscribe(pattern="^t.*")
    assert "group_id='g' pattern='^t.*' assigned=0>" in repr(by_pattern)
    assert repr(Admin(bootstrap_servers=BS, client_id="a1")) == (
        "<Admin stopped client_id='a1' bootstrap='h1:9092,h2:9093'>"
    )
    assert repr(ShareConsumer("t", bootstrap_servers=BS, group_id="sg", client_id="s1")) == (
        "<ShareConsumer new client_id='s1' bootstrap='h1:9092,h2:9093' group_id='sg' "
        "topics=['t'] assigned=0>"
    )
    assert repr(Producer(bootstrap_servers=BS, client_id="p1", transactional_id="tx")) == (
        "<Producer new client_id='p1' bootstrap='h1:9092,h2:9093' transactional_id='tx'>"
    )


def test_a_repr_never_raises() -> None:
    # half-built (a raising __init__, or a subclass that calls it late): the default form
    for cls in (Consumer, Admin, ShareConsumer, Producer):
        bare: Any = object.__new__(cls)
        assert re.fullmatch(rf"<aiokproto\..*{cls.__name__} object at 0x[0-9a-f]+>", repr(bare))
