"""aiokproto/options.py is the one source of the options: its names are exactly what the
clients accept, its documented defaults are what they apply, and the configuration
reference is generated from it (tools/config_doc.py)."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from aiokproto import Admin, Consumer, Producer, ShareConsumer
from aiokproto.config import CLIENT_OPTIONS
from aiokproto.consumer.consumer_config import CONSUMER_OPTIONS, group_option_names
from aiokproto.producer.options import PRODUCER_OPTIONS
from aiokproto.records import compression
from aiokproto.share.consumer import _SHARE_OPTIONS
from tools import config_doc

FOUND = config_doc.options(config_doc.SOURCE.read_text())


def _names(*classes: str) -> set[str]:
    return {opt.name for cls in classes for opt in FOUND[cls]}


def test_the_reference_page_is_generated_from_options_py() -> None:
    page = config_doc.PAGE.read_text()
    assert config_doc.render_page(page, config_doc.SOURCE.read_text()) == page, (
        "docs/reference/config.md is stale: run python -m tools.config_doc"
    )
    assert config_doc.main(["--check"]) == 0
    for name in CLIENT_OPTIONS | PRODUCER_OPTIONS | CONSUMER_OPTIONS | _SHARE_OPTIONS:
        assert f"`{name}`" in page, name


def test_an_option_without_a_doc_or_a_default_line_fails_the_generator() -> None:
    undocumented = "class ProducerOptions(TypedDict):\n    linger_ms: int\n    acks: int\n"
    with pytest.raises(config_doc.ConfigDocError, match=r"ProducerOptions\.linger_ms has no doc"):
        config_doc.options(undocumented)
    no_default = 'class ProducerOptions(TypedDict):\n    linger_ms: int\n    """Waits."""\n'
    with pytest.raises(config_doc.ConfigDocError, match="must end with 'Default:"):
        config_doc.options(no_default)
    bad_unit = 'class C(TypedDict):\n    x: int\n    """Waits. Default: ``5`` hours."""\n'
    with pytest.raises(config_doc.ConfigDocError, match="unknown unit"):
        config_doc.options(bad_unit)
    assert config_doc.options(
        'class C(TypedDict):\n    x: int\n    """Waits.\n\n    Default: ``5`` ms."""\n'
    )["C"][0] == config_doc.Option("x", "int", "Waits.", "5", "ms")


def test_the_typed_options_are_exactly_what_each_client_accepts() -> None:
    shared = _names("ClientOptions")
    assert shared == CLIENT_OPTIONS
    assert shared | _names("SerializerOptions", "ProducerOptions") == (
        CLIENT_OPTIONS | PRODUCER_OPTIONS
    )
    assert shared | _names("DeserializerOptions", "ConsumerOptions", "GroupOptions") == (
        CLIENT_OPTIONS | CONSUMER_OPTIONS | group_option_names()
    )
    assert shared | _names("DeserializerOptions", "ShareConsumerOptions") == (
        CLIENT_OPTIONS | _SHARE_OPTIONS
    )


# how a client keeps an option whose documented value it stores in another form
_STORED: dict[str, Any] = {
    "acks": {"all": -1},
    "compression_type": {"none": compression.NONE},
}
_STORED_AS = {"compression_type": "compression"}


def _documented(*classes: str) -> dict[str, Any]:
    out = {}
    for cls in classes:
        for opt in FOUND[cls]:
            if opt.default is not None:
                value = ast.literal_eval(opt.default)
                out[opt.name] = _STORED.get(opt.name, {}).get(value, value)
    return out


def _check(documented: dict[str, Any], *applied: object) -> None:
    for name, want in documented.items():
        holder = next(h for h in applied if hasattr(h, _STORED_AS.get(name, name)))
        got = getattr(holder, _STORED_AS.get(name, name))
        assert got == want, f"{name}: documented {want!r}, applied {got!r}"


def test_documented_defaults_are_the_defaults_applied() -> None:
    bootstrap = "localhost:9092"
    producer = Producer(bootstrap_servers=bootstrap)
    _check(_documented("ClientOptions"), producer.config)
    _check(_documented("SerializerOptions", "ProducerOptions"), producer.options)
    _check(
        _documented("DeserializerOptions", "ConsumerOptions"),
        Consumer(bootstrap_servers=bootstrap)._config,
    )
    member = Consumer(bootstrap_servers=bootstrap, group_id="g")
    _check(_documented("GroupOptions"), member._group_config)
    share = ShareConsumer(bootstrap_servers=bootstrap, group_id="g")
    _check(_documented("DeserializerOptions", "ShareConsumerOptions"), share._opts)
    admin = Admin(bootstrap_servers=bootstrap)
    admin_defaults = _documented("ClientOptions")
    admin_defaults["allow_auto_create_topics"] = False  # Admin never creates topics
    _check(admin_defaults, admin.config)
