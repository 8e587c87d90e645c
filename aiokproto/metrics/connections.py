"""Request and connection metrics: per client and per broker, under Java's names."""

from __future__ import annotations

from aiokproto.metrics.registry import MetricsRegistry

_RATE_TOTAL = ("count-rate", "count-total")


class NodeMetrics:
    """What one broker's connections record; each call feeds the node's sensors and
    the client-wide ones."""

    __slots__ = ("_all", "latency", "requests", "responses")

    def __init__(self, owner: ConnectionMetrics, node_id: int) -> None:
        reg = owner.registry
        group, node = owner.node_group, f"node-{node_id}"
        self._all = owner
        self.requests = reg.sensor()
        self.responses = reg.sensor()
        self.latency = reg.sensor()
        reg.publish(self.requests, "request", group, _RATE_TOTAL, "requests sent", node_id=node)
        reg.publish(self.requests, "request-size", group, ("avg", "max"), node_id=node)
        reg.publish(self.requests, "outgoing-byte", group, ("rate", "total"), node_id=node)
        reg.publish(self.responses, "response", group, _RATE_TOTAL, node_id=node)
        reg.publish(self.responses, "incoming-byte", group, ("rate", "total"), node_id=node)
        reg.publish(self.latency, "request-latency", group, ("avg", "max"), node_id=node)

    def sent(self, size: int, now: float) -> None:
        self.requests.record(size, now)
        self._all.requests.record(size, now)

    def received(self, size: int, latency_s: float, now: float) -> None:
        ms = latency_s * 1000
        self.responses.record(size, now)
        self.latency.record(ms, now)
        self._all.responses.record(size, now)
        self._all.latency.record(ms, now)

    def opened(self) -> None:
        self._all.created.record()
        self._all.open += 1

    def closed(self) -> None:
        self._all.closed.record()
        self._all.open -= 1


class ConnectionMetrics:
    """The connection metrics of one client: ``kind`` is ``producer``, ``consumer``,
    ``admin-client`` or ``share-consumer`` (Java's group prefixes)."""

    def __init__(self, registry: MetricsRegistry, kind: str) -> None:
        self.registry = registry
        self.group = f"{kind}-metrics"
        self.node_group = f"{kind}-node-metrics"
        self.open = 0
        self._nodes: dict[int, NodeMetrics] = {}
        reg, group = registry, self.group
        self.requests = reg.sensor()
        self.responses = reg.sensor()
        self.latency = reg.sensor()
        self.created = reg.sensor()
        self.closed = reg.sensor()
        reg.publish(self.requests, "request", group, _RATE_TOTAL, "requests sent")
        reg.publish(self.requests, "request-size", group, ("avg", "max"), "request bytes")
        reg.publish(self.requests, "outgoing-byte", group, ("rate", "total"), "bytes sent")
        reg.publish(self.responses, "response", group, _RATE_TOTAL, "responses received")
        reg.publish(self.responses, "incoming-byte", group, ("rate", "total"), "bytes received")
        reg.publish(self.latency, "request-latency", group, ("avg", "max"), "ms to an answer")
        reg.publish(self.created, "connection-creation", group, _RATE_TOTAL, "connections opened")
        reg.publish(self.closed, "connection-close", group, _RATE_TOTAL, "connections closed")
        reg.gauge("connection-count", group, lambda: self.open, "connections open now")

    def node(self, node_id: int) -> NodeMetrics:
        found = self._nodes.get(node_id)
        if found is None:
            found = self._nodes[node_id] = NodeMetrics(self, node_id)
        return found
