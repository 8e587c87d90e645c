"""KIP-714 client metrics push: the clients' ``TelemetryReporter`` (``reporter.py``),
its state machine (``state.py``), metric names and selectors (``name.py``), the
payload (``payload.py``) and its OTLP encoding (``otlp.py``).

Its own package, beside ``aiokproto.metrics`` (which it reads) and using
``aiokproto.cluster`` (which records connection metrics), so those two do not import
each other.
"""
