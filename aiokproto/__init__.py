"""aiokproto: an asyncio-native Apache Kafka client."""

__version__ = "0.1.0"
