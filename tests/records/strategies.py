from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from aiokproto.records import compression as c

maybe_bytes = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=200, max_size=600))
headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
)
timestamps = st.integers(min_value=0, max_value=2**41)
record = st.tuples(st.integers(-10_000, 10_000), maybe_bytes, maybe_bytes, headers)
codecs = st.sampled_from([c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
legacy_codecs = st.sampled_from([c.NONE, c.GZIP, c.SNAPPY, c.LZ4])

# applied per test (not a global profile) so other suites keep their own settings
RECORDS = settings(
    max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
