"""``import aiokproto`` and ``aiokproto --version`` import no client code.

Each case runs in a fresh interpreter and looks at ``sys.modules``, not at the clock:
the generated message codecs and the admin client cost most of an import (about
0.4 s together), so they load only when a program names a client.
"""

from __future__ import annotations

import json
import os
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


def test_help_imports_no_sub_command_and_no_client() -> None:
    # the root's --help lists the sub-commands from aiokproto.cli.app.COMMANDS
    code = (
        "import sys\nsys.argv = ['aiokproto', '--help']\nfrom aiokproto.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code"
    )
    loaded = modules_after(code)
    assert "aiokproto.cli.app" in loaded and "click" in loaded
    assert not [m for m in loaded if m.startswith(("aiokproto.producer", "aiokproto.admin"))]
    assert not [m for m in loaded if m.startswith(("aiokproto.consumer", "aiokproto.net"))]
    assert not {"aiokproto.cli.common", "aiokproto.cli.io", "aiokproto.cli.topics"} & set(loaded)


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


#: what a plain producer's or consumer's import used to load and now loads on first use,
#: each with the tests that exercise that use
DEFERRED = (
    "aiokproto.producer.transactions",  # tests/producer/test_transactions_broker.py
    "aiokproto.protocol.messages.end_txn",
    "aiokproto.protocol.messages.add_partitions_to_txn",
    "aiokproto.protocol.messages.add_offsets_to_txn",
    "aiokproto.protocol.messages.txn_offset_commit",
    "aiokproto.protocol.messages.find_coordinator",  # tests/consumer/test_group_consumer.py
    "aiokproto.protocol.messages.sasl_handshake",  # tests/net/test_broker.py (SASL)
    "aiokproto.protocol.messages.sasl_authenticate",  # tests/net/test_listener_mismatch.py
    "aiokproto.net.kerberos",  # tests/unit/net/test_kerberos.py, tests/kerberos
    "aiokproto.telemetry.payload",  # tests/unit/telemetry/test_reporter.py
    "aiokproto.telemetry.otlp",
    "crc32c",  # the package's __init__: aiokproto.records.crc loads its extension
    "importlib.metadata",  # ... which the package's __init__ imported, and argparse
    "argparse",
    "lz4",  # tests/unit/records/test_compression.py
    "snappy",
    "zstandard",
    "hashlib",  # SCRAM: tests/unit/net/test_sasl.py, tests/admin/test_admin_cluster.py
    "hmac",
    "difflib",  # a misspelled option: tests/test_aiokafka_options.py
)

# Runs in a fresh interpreter: the modules each import added, then each feature used
# in the same process, which must work and load what it needs (so a misspelled name
# in DEFERRED, or a feature that no longer needs its module, fails here too).
_DEFERRAL_PROBE = """
import json, sys
before = set(sys.modules)
from aiokproto import Producer, Consumer, Admin
loaded = set(sys.modules) - before
absent = sorted(m for m in DEFERRED if m in loaded)

from aiokproto import accel
from aiokproto.errors import KafkaConfigError
from aiokproto.net.sasl import ScramMechanism
from aiokproto.records import compression
from aiokproto.records.batch_v2 import RecordBatch, RecordBatchBuilder

for codec in (compression.SNAPPY, compression.LZ4, compression.ZSTD):
    data = b"kafka " * 1000
    assert compression.decompress(codec, compression.compress(codec, data)) == data
builder = RecordBatchBuilder(batch_size=1024, compression=compression.NONE)
builder.append(1, b"k", b"v", [])
batch = RecordBatch.parse(builder.build())  # checks the CRC-32C it wrote
assert batch.validate_crc() and [r.value for r in batch] == [b"v"]
scram = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
scram.first_message()
scram.respond(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
              b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")  # RFC 7677's server-first
try:
    Producer(bootstrap_servers="x", linger=5)
except KafkaConfigError as exc:
    assert "did you mean linger_ms" in str(exc), exc
else:
    raise AssertionError("a misspelled option was accepted")
print(json.dumps({"absent": absent, "native": accel.native is not None,
                  "after_use": sorted(set(sys.modules) & set(DEFERRED))}))
"""


@pytest.mark.parametrize("pure_python", ["0", "1"], ids=["compiled", "pure-python"])
def test_client_imports_defer_what_only_some_programs_use(pure_python: str) -> None:
    probe = f"DEFERRED = {DEFERRED!r}\n{_DEFERRAL_PROBE}"
    env = {**os.environ, "AIOKPROTO_PURE_PYTHON": pure_python}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, check=False, timeout=60, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["absent"] == [], f"loaded by importing the clients: {result['absent']}"
    assert result["native"] is (pure_python == "0")
    # used: the codecs, the CRC's extension, SCRAM and the typo hint loaded theirs
    used = {"lz4", "snappy", "zstandard", "hashlib", "hmac", "difflib"}
    assert used <= set(result["after_use"]), result["after_use"]
    assert "crc32c" not in result["after_use"]  # the CRC ran without the package import
