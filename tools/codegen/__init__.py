"""Code generator: Kafka JSON specs -> committed Python codecs (``python -m tools.codegen``)."""
