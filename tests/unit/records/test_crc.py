"""aiokproto.records.crc: the crc32c package's function, loaded without the package's
``__init__``, and the public import when the package is laid out otherwise."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os

import crc32c as package
import pytest

from aiokproto.records import crc


def test_check_value_and_the_package_agree_on_every_buffer_type() -> None:
    assert crc.crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value (RFC 3720)
    assert crc.crc32c(b"") == 0
    data = os.urandom(100_003)
    for buf in (data, bytearray(data), memoryview(data)[7:]):
        assert crc.crc32c(buf) == package.crc32c(buf)


def test_the_extension_is_found_where_the_package_keeps_it() -> None:
    found = crc._from_extension()
    assert found is not None
    assert found(b"123456789") == 0xE3069283


@pytest.mark.parametrize("layout", ["no package spec", "no extension file"])
def test_another_layout_falls_back_to_the_public_function(
    monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    if layout == "no package spec":
        monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    else:
        monkeypatch.setattr(importlib.machinery, "EXTENSION_SUFFIXES", [".not-there"])
    assert crc._from_extension() is None
    assert crc._load() is package.crc32c
