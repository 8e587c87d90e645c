"""The benchmarks: ``python -m benchmarks`` (``make bench`` runs ``--quick``, ``make
bench-full`` the full matrix): the record codec bench and client benchmarks against peer
clients, results in benchmarks/results/ (git-ignored; the README's copy in docs/bench/)."""
