"""Cluster plumbing under every client: ``ClusterClient`` (connections by node and
purpose, routing), the ``MetadataCache`` actor, the coordinator cache, back-off."""
