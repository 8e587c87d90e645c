"""``message_module``: a generated module stands in at once and runs on first use."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import ModuleType

import pytest

from aiokproto.protocol.lazy import message_module


def test_a_loaded_module_is_returned_itself() -> None:
    from aiokproto.protocol.messages import heartbeat

    assert message_module("heartbeat") is heartbeat


def test_an_unknown_name_fails_at_once() -> None:
    with pytest.raises(ImportError, match=r"no generated message module .*\.create_topic'"):
        message_module("create_topic")


def test_the_module_runs_on_the_first_attribute_read() -> None:
    # a fresh interpreter: this one may have imported the module already
    code = textwrap.dedent(
        """
        import sys
        from types import ModuleType
        from aiokproto.protocol.lazy import message_module

        NAME = "aiokproto.protocol.messages.elect_leaders"
        lazy = message_module("elect_leaders")
        assert isinstance(lazy, ModuleType) and NAME not in sys.modules
        request = lazy.ElectLeadersRequest(timeout_ms=5)
        real = sys.modules[NAME]
        assert type(request) is real.ElectLeadersRequest
        assert "ElectLeadersRequest" in vars(lazy)  # later reads skip __getattr__
        assert message_module("elect_leaders") is real
        try:
            lazy.NoSuchName
        except AttributeError:
            print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout == "ok\n", out.stderr


def test_it_is_a_module_for_isinstance_checks() -> None:
    assert isinstance(message_module("elect_leaders"), ModuleType)
