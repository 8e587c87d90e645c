"""One connection to one broker: ``BrokerConnection`` (``connection.py``), sans-I/O
framing, SASL mechanisms, TLS and SASL settings."""
