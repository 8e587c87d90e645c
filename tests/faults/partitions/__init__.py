"""Real network partitions: a 3-node KRaft cluster and its clients in Linux network
namespaces of their own, links cut, healed and made lossy by the test, and a checker
over the full history (lost, duplicated and reordered records, aborted and premature
reads)."""
