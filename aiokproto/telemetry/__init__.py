"""KIP-714 client metrics push, its own package so that ``metrics/`` and ``cluster/`` do
not import each other (it reads the first and uses the second;
tests/test_import_graph.py): the clients' ``TelemetryReporter`` (``reporter.py``, the
one-task actor each client owns, logger ``aiokproto.metrics.telemetry``), its state
machine (``state.py``, Java's states, one ``TABLE`` of every state x input), metric
names and selectors (``name.py``), the payload (``payload.py``: snapshots to gauges and
delta or cumulative sums, the codec choice) and its OTLP encoding (``otlp.py``, a
hand-written encoder of the ``MetricsData`` subset: no protobuf at runtime).
"""
