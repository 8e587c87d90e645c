"""The Admin client: cluster management over the generated protocol messages.

Routing: topic, ACL, SCRAM and election mutations go to the controller-facing broker
(in KRaft any broker forwards them; NOT_CONTROLLER refreshes metadata and retries);
partition-scoped requests go to each partition's leader, one request per leader, sent
concurrently; group requests (consumer and share groups) go to the group's
coordinator; group listings and log dirs fan out to every broker. Every batch call
runs through ``run_batch``: per-item results, retriable items retried with back-off
within the call's timeout.
"""

from __future__ import annotations

from aiokproto.admin.acls import AclsMixin
from aiokproto.admin.base import AdminBase
from aiokproto.admin.cluster import ClusterMixin
from aiokproto.admin.configs import ConfigsMixin
from aiokproto.admin.groups import GroupsMixin
from aiokproto.admin.partitions import PartitionsMixin
from aiokproto.admin.scram_ops import ScramMixin
from aiokproto.admin.share_groups import ShareGroupsMixin
from aiokproto.admin.topics import TopicsMixin

__all__ = ["Admin"]


class Admin(
    TopicsMixin,
    ConfigsMixin,
    ShareGroupsMixin,
    GroupsMixin,
    PartitionsMixin,
    ClusterMixin,
    AclsMixin,
    ScramMixin,
    AdminBase,
):
    """Kafka cluster administration; an async context manager (or ``start()``/``close()``).

    Options are the shared client options (``bootstrap_servers``, ``client_id``,
    ``request_timeout_ms``, ``default_api_timeout_ms``...), typed and documented in
    ``aiokproto.options.ClientOptions``. Every method takes ``timeout_ms`` (default
    ``default_api_timeout_ms``).
    """
