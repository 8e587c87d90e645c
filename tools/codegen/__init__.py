"""Code generator: Kafka JSON specs -> committed Python codecs (``python -m
tools.codegen``, ``--check``): specs/4.4.0 and specs/3.9.1 (generator input only, not in
the wheel) -> aiokproto/protocol/messages, specs/errors.tsv -> aiokproto/errors.py."""
