"""``import aiokproto`` and ``aiokproto --version`` import no client code.

Each case runs in a fresh interpreter and looks at ``sys.modules``, not at the clock:
the generated message codecs and the admin client cost most of an import (about
0.4 s together), so they load only when a program names a client.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import aiokproto


def modules_after(code: str) -> list[str]:
    """The ``aiokproto`` and ``click`` modules loaded after running ``code``."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('aiokproto', 'click'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return loaded


def test_import_loads_no_client_and_no_message_codec() -> None:
    loaded = modules_after("import aiokproto")
    assert not [m for m in loaded if m.startswith("aiokproto.protocol.messages")]
    assert not [m for m in loaded if m.startswith("aiokproto.admin")]
    assert not [m for m in loaded if m.startswith(("aiokproto.producer", "aiokproto.consumer"))]
    assert not [m for m in loaded if m.startswith("aiokproto.parallel")]


def test_a_client_name_loads_that_client_only() -> None:
    loaded = modules_after("from aiokproto import Producer")
    assert "aiokproto.producer.producer" in loaded
    assert not [m for m in loaded if m.startswith(("aiokproto.admin", "aiokproto.share"))]
    loaded = modules_after("import aiokproto\naiokproto.Admin")
    assert "aiokproto.admin.client" in loaded
    # the Admin's two dozen APIs load their codecs when called (aiokproto.protocol.lazy):
    # only the connection's, metadata's and the coordinators' load with it
    codecs = [m for m in loaded if m.startswith("aiokproto.protocol.messages.")]
    assert "aiokproto.protocol.messages.metadata" in codecs
    assert "aiokproto.protocol.messages.create_topics" not in codecs
    assert len(codecs) <= 10, codecs
    # ParallelConsumer: the consumer it wraps, not the producer (only a dead-letter
    # producer the user passes brings that in) nor the admin client
    loaded = modules_after("from aiokproto import ParallelConsumer")
    assert "aiokproto.parallel.consumer" in loaded
    assert not [m for m in loaded if m.startswith(("aiokproto.producer", "aiokproto.admin"))]


def test_version_flag_imports_neither_click_nor_a_client() -> None:
    code = (
        "import sys\nsys.argv = ['aiokproto', '--version']\nfrom aiokproto.cli import main\nmain()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout == f"aiokproto, version {aiokproto.__version__}\n"
    loaded = modules_after(code)
    assert not [m for m in loaded if m.startswith("click")]
    assert not [m for m in loaded if m.startswith(("aiokproto.producer", "aiokproto.admin"))]


def test_lazy_names_resolve_to_the_defining_modules() -> None:
    from aiokproto.admin import Admin
    from aiokproto.share import ShareConsumer

    assert aiokproto.Admin is Admin
    assert aiokproto.ShareConsumer is ShareConsumer
    from aiokproto.parallel import ParallelConsumer

    assert aiokproto.ParallelConsumer is ParallelConsumer
    assert set(aiokproto.__all__) <= set(dir(aiokproto))
    with pytest.raises(AttributeError, match="no attribute 'Admn'"):
        aiokproto.Admn  # noqa: B018
