"""aiokproto.admin.codecs: the Admin's generated codecs, each imported on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aiokproto.admin import codecs


def test_a_codec_is_imported_on_its_first_read_and_kept() -> None:
    code = (
        "import sys; from aiokproto.admin import codecs; "
        "name = 'aiokproto.protocol.messages.elect_leaders'; "
        "m = codecs.elect_leaders; assert name not in sys.modules, 'imported too early'; "
        "m.ElectLeadersRequest(timeout_ms=5); assert name in sys.modules; "
        "assert codecs.elect_leaders is m; assert 'elect_leaders' in vars(codecs)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_name_without_a_codec_is_an_attribute_error_and_dunders_are_absent() -> None:
    with pytest.raises(AttributeError, match="no_such_api") as info:
        codecs.no_such_api  # noqa: B018
    assert isinstance(info.value.__cause__, ImportError)
    assert not hasattr(codecs, "no_such_api")
    assert getattr(codecs, "_private", None) is None
    with pytest.raises(AttributeError):
        codecs.__wrapped__  # noqa: B018
