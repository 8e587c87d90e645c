"""What Admin methods take: ``OffsetSpec`` validation."""

from __future__ import annotations

import pytest

from aiokproto.admin.types import OffsetSpec
from aiokproto.errors import (
    KafkaConfigError,
)


def test_offset_spec_validation() -> None:
    assert OffsetSpec.earliest().timestamp == -2
    assert OffsetSpec.max_timestamp().timestamp == -3
    with pytest.raises(KafkaConfigError):
        OffsetSpec.for_timestamp(-5)
