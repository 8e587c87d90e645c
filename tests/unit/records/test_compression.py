from __future__ import annotations

import gzip
import os
import struct
import zlib

import lz4.frame  # type: ignore[import-untyped]
import pytest
import snappy  # type: ignore[import-untyped]
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from aiokproto.errors import CorruptRecordError, UnsupportedCompressionTypeError
from aiokproto.records import compression as c
from tests.records.strategies import RECORDS

CODECS = [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
DATA = [b"", b"a", os.urandom(5000), b"kafka " * 50_000]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("data", DATA, ids=["empty", "one", "random", "repetitive"])
def test_round_trip(codec: int, magic: int, data: bytes) -> None:
    assert c.decompress(codec, c.compress(codec, data, magic=magic), magic=magic) == data


@RECORDS
@given(st.binary(max_size=3000), st.sampled_from(CODECS))
def test_round_trip_property(data: bytes, codec: int) -> None:
    assert c.decompress(codec, c.compress(codec, data)) == data


def test_codec_ids() -> None:
    assert c.codec_id("zstd") == 4
    assert c.codec_id(None) == 0
    assert c.codec_id(2) == 2
    with pytest.raises(UnsupportedCompressionTypeError):
        c.codec_id("brotli")
    with pytest.raises(UnsupportedCompressionTypeError):
        c.decompress(5, b"x")
    with pytest.raises(UnsupportedCompressionTypeError):
        c.compress(7, b"x")


def test_gzip_output_is_gzip_and_accepts_zlib() -> None:
    data = b"hello" * 100
    assert gzip.decompress(c.compress(c.GZIP, data)) == data
    assert c.decompress(c.GZIP, zlib.compress(data)) == data
    # concatenated gzip members are one stream
    assert c.decompress(c.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_snappy_xerial_written_like_java() -> None:
    data = os.urandom(100) * 1000  # > one 32 KiB block
    out = c.compress(c.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(snappy.uncompress(out[pos + 4:pos + 4 + n]))
        pos += 4 + n
    assert len(blocks) == 4 and b"".join(blocks) == data


def test_snappy_xerial_fixture_and_raw_fixture() -> None:
    # hand-made xerial stream: header then two raw blocks "hello " and "world"
    b1, b2 = snappy.compress(b"hello "), snappy.compress(b"world")
    xerial = (b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
              + struct.pack(">i", len(b1)) + b1 + struct.pack(">i", len(b2)) + b2)
    assert c.decompress(c.SNAPPY, xerial) == b"hello world"
    # raw snappy fixture: preamble varint 5, literal tag (len-1)<<2, "hello"
    assert c.decompress(c.SNAPPY, b"\x05\x10hello") == b"hello"


def test_lz4_frame_is_independent_blocks_and_readable() -> None:
    data = os.urandom(200_000)
    out = c.compress(c.LZ4, data)
    assert out[:4] == b"\x04\x22\x4d\x18"
    assert out[4] & 0x20  # block independence flag, as Kafka's Java reader needs
    assert lz4.frame.decompress(out) == data


def test_lz4_magic0_broken_header_checksum() -> None:
    data = b"old kafka " * 100
    broken = c.compress(c.LZ4, data, magic=0)
    good = c.compress(c.LZ4, data, magic=1)
    assert broken != good and broken[:6] == good[:6] and broken[7:] == good[7:]
    # fixture: HC computed over magic+FLG+BD as Kafka < 0.10 did
    flg_bd = good[4:6]
    assert broken[6] == (c.xxh32(b"\x04\x22\x4d\x18" + flg_bd) >> 8) & 0xFF
    assert good[6] == (c.xxh32(flg_bd) >> 8) & 0xFF
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(broken)  # the library rejects it; we repair it
    assert c.decompress(c.LZ4, broken, magic=0) == data
    assert c.decompress(c.LZ4, good, magic=0) == data


def test_xxh32_known_vectors() -> None:
    assert c.xxh32(b"") == 0x02CC5D05
    assert c.xxh32(b"a") == 0x550D7456
    assert c.xxh32(b"abc") == 0x32D153FF
    assert c.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bomb_is_bounded(codec: int) -> None:
    bomb = c.compress(codec, bytes(20_000_000))
    assert len(bomb) < 2_000_000
    with pytest.raises(CorruptRecordError, match="more than"):
        c.decompress(codec, bomb, max_size=1_000_000)
    assert len(c.decompress(codec, bomb, max_size=20_000_000)) == 20_000_000


def test_zstd_without_content_size_and_forged_size() -> None:
    data = b"z" * 100_000
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert c.decompress(c.ZSTD, frame) == data
    with pytest.raises(CorruptRecordError):
        c.decompress(c.ZSTD, frame, max_size=1000)
    # a header claiming 2**40 bytes must be refused before any allocation
    sized = zstandard.ZstdCompressor().compress(b"x" * 1000)
    with pytest.raises(CorruptRecordError):
        c.decompress(c.ZSTD, sized, max_size=100)


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_and_truncation_raise_corrupt(codec: int) -> None:
    data = os.urandom(3000) * 3
    out = c.compress(codec, data)
    for cut in (1, 2, 5, len(out) // 2, len(out) - 1):
        try:
            result = c.decompress(codec, out[:cut])
        except CorruptRecordError:
            continue
        assert result != data
    for junk in (b"\x00" * 20, os.urandom(64), b"\x82SNAPPY\x00" + os.urandom(30)):
        try:
            c.decompress(codec, junk)
        except CorruptRecordError:
            pass


@RECORDS
@given(st.binary(max_size=200), st.sampled_from(CODECS))
def test_fuzz_only_corrupt_record_error(data: bytes, codec: int) -> None:
    try:
        c.decompress(codec, data, max_size=1 << 20)
    except CorruptRecordError:
        pass
