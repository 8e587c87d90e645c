"""The type variables of records' keys and values (``Producer[K, V]``, ``Consumer[K,
V]``, ``ConsumerRecord[K, V]``, ``ShareConsumer``/``ShareRecord``), with defaults (PEP
696) for type checkers only.

``Producer[K, V]``, ``Consumer[K, V]``, ``ConsumerRecord[K, V]`` (and the share
consumer's) are generic in the key and value types their (de)serializers give. A bare
``Consumer`` or ``ConsumerRecord`` in an annotation means no deserializer (``bytes |
None``), and a bare ``Producer`` no serializer (``bytes``): that needs TypeVar defaults
(PEP 696), which ``typing`` has from Python 3.13 only. Type checkers know
``typing_extensions`` from their own bundled stubs, so it is imported for them alone and
never at run time: no dependency, and nothing to install (tests/typing checks that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    #: a consumed record's key and value: ``bytes | None`` without a deserializer
    K = TypeVar("K", default=bytes | None)
    V = TypeVar("V", default=bytes | None)
    #: what a producer's send() takes: ``bytes`` (or bytearray, memoryview) without a
    #: serializer
    SK = TypeVar("SK", default=bytes | bytearray | memoryview)
    SV = TypeVar("SV", default=bytes | bytearray | memoryview)
    #: a (de)serializer's type where the call gives no other hint (a lambda): Any
    T = TypeVar("T", default=Any)
    U = TypeVar("U", default=Any)
else:
    from typing import TypeVar

    K = TypeVar("K")
    V = TypeVar("V")
    SK = TypeVar("SK")
    SV = TypeVar("SV")
    T = TypeVar("T")
    U = TypeVar("U")

#: what send() takes without a serializer
Raw = bytes | bytearray | memoryview
