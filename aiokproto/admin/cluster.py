"""Admin cluster methods: describe the cluster and its features."""

from __future__ import annotations

from aiokproto.admin import codecs
from aiokproto.admin.base import AdminBase, _error, _operations
from aiokproto.admin.types import (
    ClusterDescription,
    FeatureMetadata,
    FinalizedVersionRange,
    SupportedVersionRange,
)
from aiokproto.cluster.snapshot import BrokerInfo
from aiokproto.errors import UnsupportedVersionError
from aiokproto.protocol.messages import api_versions as m_api_versions


class ClusterMixin(AdminBase):
    """Cluster-wide descriptions."""

    async def describe_cluster(
        self, *, include_authorized_operations: bool = False, timeout_ms: int | None = None
    ) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster, or Metadata on old brokers)."""
        ops = include_authorized_operations
        DC = codecs.describe_cluster

        async def call() -> ClusterDescription:
            node = self._any_node()
            conn = await self.cluster.connection(node)
            if DC.DescribeClusterRequest.API_KEY not in conn.api_versions:
                snap = await self.cluster.metadata.refresh()
                return ClusterDescription(
                    snap.cluster_id,
                    snap.controller_id if snap.controller_id >= 0 else None,
                    tuple(snap.brokers[b] for b in sorted(snap.brokers)),
                )
            _, response = await self._send(
                node,
                DC.DescribeClusterRequest,
                lambda v: DC.DescribeClusterRequest(include_cluster_authorized_operations=ops),
            )
            if response.error_code:
                raise _error(response.error_code, response.error_message, "DescribeCluster")
            return ClusterDescription(
                cluster_id=response.cluster_id,
                controller_id=response.controller_id if response.controller_id >= 0 else None,
                brokers=tuple(
                    sorted(
                        (BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in response.brokers),
                        key=lambda b: b.node_id,
                    )
                ),
                authorized_operations=_operations(response.cluster_authorized_operations, ops),
            )

        return await self._single("describe_cluster", call, self._timeout(timeout_ms))

    async def describe_features(self, *, timeout_ms: int | None = None) -> FeatureMetadata:
        """Finalized and supported feature versions (ApiVersions v3+)."""
        AV = m_api_versions

        async def call() -> FeatureMetadata:
            conn = await self.cluster.connection(self._any_node())
            version = conn.version_for(AV.ApiVersionsRequest)
            if version < 3:
                raise UnsupportedVersionError("describing features needs ApiVersions v3+")
            response = await conn.send(
                AV.ApiVersionsRequest(
                    client_software_name="aiokproto", client_software_version="0.1.0"
                ),
                version,
            )
            if response.error_code:
                raise _error(response.error_code, None, "ApiVersions")
            epoch = response.finalized_features_epoch
            return FeatureMetadata(
                finalized_features={
                    f.name: FinalizedVersionRange(f.min_version_level, f.max_version_level)
                    for f in response.finalized_features
                },
                finalized_features_epoch=epoch if epoch >= 0 else None,
                supported_features={
                    f.name: SupportedVersionRange(f.min_version, f.max_version)
                    for f in response.supported_features
                },
            )

        return await self._single("describe_features", call, self._timeout(timeout_ms))
