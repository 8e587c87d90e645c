"""A real local Apache Kafka (KRaft) for aiokproto's tests, examples and benchmarks:
jars from Maven Central (``jars.py``, POMs in ``poms/``, cached in the user cache
directory, ``default_cache_dir()``), nodes and clusters (``node.py``, ``cluster.py``),
listeners and certificates (``broker_config.py``, ``certs.py``), a wire probe
(``probe.py``), discovery order (``discovery.py``), a CLI and a pytest plugin.

``LocalKafka`` runs brokers from jars resolved from Maven Central into the user cache
directory (``default_cache_dir()``: ``$AIOKPROTO_CACHE_DIR``, else
``~/.cache/aiokproto``); ``kafka_for_tests`` picks an external cluster, local jars or
testcontainers; ``aiokproto.testing.pytest_plugin`` provides pytest fixtures.
"""

from aiokproto.testing.broker_config import (
    ALL_LISTENERS,
    DEFAULT_SASL_USERS,
    PLAINTEXT,
    PLAINTEXT_ONLY,
    SASL_MECHANISMS,
    SASL_PLAINTEXT,
    SASL_SSL,
    SSL,
    SaslUser,
    SecurityOptions,
)
from aiokproto.testing.certs import TlsFiles, generate_tls_files
from aiokproto.testing.cluster import LocalKafka
from aiokproto.testing.discovery import (
    ContainerKafka,
    ExternalKafka,
    KafkaService,
    kafka_for_tests,
    requested_version,
)
from aiokproto.testing.errors import KafkaHarnessError
from aiokproto.testing.jars import (
    DEFAULT_VERSION,
    SUPPORTED_VERSIONS,
    default_cache_dir,
    resolve_jars,
)
from aiokproto.testing.node import FAST_START_JVM_OPTIONS, THROUGHPUT_JVM_OPTIONS, KafkaNode
from aiokproto.testing.probe import BrokerInfo, ClusterMetadata, ProbeError, api_versions, metadata

__all__ = [
    "ALL_LISTENERS",
    "DEFAULT_SASL_USERS",
    "DEFAULT_VERSION",
    "FAST_START_JVM_OPTIONS",
    "PLAINTEXT",
    "PLAINTEXT_ONLY",
    "SASL_MECHANISMS",
    "SASL_PLAINTEXT",
    "SASL_SSL",
    "SSL",
    "SUPPORTED_VERSIONS",
    "THROUGHPUT_JVM_OPTIONS",
    "BrokerInfo",
    "ClusterMetadata",
    "ContainerKafka",
    "ExternalKafka",
    "KafkaHarnessError",
    "KafkaNode",
    "KafkaService",
    "LocalKafka",
    "ProbeError",
    "SaslUser",
    "SecurityOptions",
    "TlsFiles",
    "api_versions",
    "default_cache_dir",
    "generate_tls_files",
    "kafka_for_tests",
    "metadata",
    "requested_version",
    "resolve_jars",
]
