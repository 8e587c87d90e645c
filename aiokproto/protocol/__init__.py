"""The Kafka wire protocol: primitives, varints, request/response headers, the base
classes of the generated message codecs (``messages/``) and their lazy loading."""
