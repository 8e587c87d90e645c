"""Support code for the cluster-chaos fault tests: fault injection on ``LocalKafka``,
an independent observer and reader (librdkafka), sequenced load, audits, the consumer
member process and the soak script."""
