"""tests/unit holds tests that need no broker: one that asks for a broker fixture fails
here and belongs in tests/<package>/ instead (``--unit`` would deselect it anyway)."""

from __future__ import annotations

import pytest

from aiokproto.testing.pytest_plugin import _BROKER_FIXTURES


def pytest_runtest_setup(item: pytest.Item) -> None:
    # A conftest's runtest hooks run only for the items below it.
    used = _BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used:
        pytest.fail(
            f"{item.nodeid} needs a broker ({', '.join(sorted(used))}): tests/unit is for "
            "tests without one, move it to tests/<package>/",
            pytrace=False,
        )
