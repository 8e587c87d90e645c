"""Base classes of the generated message codecs (``aiokproto.protocol.messages``).

``Struct`` is any generated class (messages and their nested structs); ``Message`` adds
the version range and the public ``encode``/``decode`` entry points; ``ApiMessage``
adds the API key; ``Request``/``Response`` tie the two halves of an API together.
"""

from __future__ import annotations

import struct
from typing import ClassVar, Self

from aiokproto.errors import KafkaProtocolError, UnsupportedVersionError

__all__ = ["ApiMessage", "Message", "Request", "Response", "Struct"]

# Low-level failures a decoder can hit on malformed input; ``decode`` maps them to
# ``KafkaProtocolError`` (the readers themselves check lengths before allocating).
_DECODE_FAILURES = (struct.error, ValueError, IndexError, OverflowError, MemoryError)


class Struct:
    """A generated message or nested struct."""

    __slots__ = ()

    def _write(self, out: bytearray, version: int) -> None:
        raise NotImplementedError

    @classmethod
    def _read(cls, buf: memoryview, pos: int, version: int) -> tuple[Self, int]:
        raise NotImplementedError


class Message(Struct):
    """A top-level message: a request/response body, a header or a data struct."""

    __slots__ = ()

    NAME: ClassVar[str]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    # first flexible (compact + tagged fields) version, None if no version is flexible
    FLEXIBLE_MIN: ClassVar[int | None]
    # highest version Kafka marks stable (== MAX_VERSION unless the spec's newest
    # version is "latestVersionUnstable"; never negotiate above this one)
    MAX_STABLE_VERSION: ClassVar[int]

    @classmethod
    def check_version(cls, version: int) -> None:
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise UnsupportedVersionError(
                f"{cls.NAME} version {version} is not supported; "
                f"valid versions are {cls.MIN_VERSION}-{cls.MAX_VERSION}"
            )

    def encode(self, version: int) -> bytes:
        """The body at ``version`` (no header, no size prefix)."""
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)

    def encode_into(self, out: bytearray, version: int) -> None:
        """Append the body at ``version`` to ``out``."""
        self.check_version(version)
        try:
            self._write(out, version)
        except struct.error as e:
            raise ValueError(f"{self.NAME} v{version}: a value is out of range: {e}") from e

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Self:
        """Decode a whole body at ``version``; trailing bytes are an error."""
        obj, pos = cls.decode_from(data, 0, version)
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        if pos != size:
            raise KafkaProtocolError(
                f"{cls.NAME} v{version}: {size - pos} trailing bytes after the body"
            )
        return obj

    @classmethod
    def decode_from(
        cls, data: bytes | bytearray | memoryview, pos: int, version: int
    ) -> tuple[Self, int]:
        """Decode one body starting at ``pos``; returns it and the position after it."""
        cls.check_version(version)
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.itemsize != 1 or buf.ndim != 1:
            buf = buf.cast("B")
        try:
            return cls._read(buf, pos, version)
        except KafkaProtocolError:
            raise
        except _DECODE_FAILURES as e:
            raise KafkaProtocolError(f"malformed {cls.NAME} v{version}: {e}") from e


class ApiMessage(Message):
    """A request or response body of one Kafka API."""

    __slots__ = ()

    API_KEY: ClassVar[int]


class Response(ApiMessage):
    __slots__ = ()

    #: First version in which the broker answers a quota violation at once and the
    #: client must hold back for ``throttle_time_ms`` (KIP-219); None: never.
    CLIENT_THROTTLE_FROM: ClassVar[int | None] = None


class Request(ApiMessage):
    __slots__ = ()

    RESPONSE: ClassVar[type[Response]]
