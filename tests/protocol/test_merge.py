"""The 4.4.0 + 3.9.1 merge: every version lays out its fields as its source spec says."""

from __future__ import annotations

from typing import Any

import pytest

from aiokproto.protocol.messages import REQUESTS, RESPONSES, VERSION_RANGES
from tests.protocol.schema import SPECS, case_id, cases, merged, source_spec, sources
from tools.codegen.spec import layout, load_merged, spec_key


@pytest.mark.parametrize(("spec", "version"), cases(), ids=case_id)
def test_merged_layout_equals_source(spec: Any, version: int) -> None:
    assert layout(spec, version) == layout(source_spec(spec, version), version)


def test_newest_spec_owns_its_versions() -> None:
    new = sources()["4.4.0"]
    for spec in merged():
        src = new.get(spec_key(spec))
        if src is None:
            continue
        for v in src.versions:
            assert spec.source[v] == "4.4.0"
        for v in spec.versions - src.versions:
            assert spec.source[v] == "3.9.1"


def test_union_of_versions() -> None:
    old, new = sources()["3.9.1"], sources()["4.4.0"]
    for spec in merged():
        key = spec_key(spec)
        want = (new[key].versions if key in new else frozenset()) | (
            old[key].versions if key in old else frozenset()
        )
        assert spec.versions == want, spec.name


def test_versions_removed_by_kip_896_are_back() -> None:
    assert VERSION_RANGES[0] == (0, 13) or VERSION_RANGES[0][0] == 0  # Produce v0-2
    assert REQUESTS[0].MIN_VERSION == 0
    assert REQUESTS[1].MIN_VERSION == 0  # Fetch v0-3
    assert REQUESTS[3].MIN_VERSION == 0  # Metadata v0-3
    # fields only old versions had are carried
    from aiokproto.protocol.messages.list_offsets import ListOffsetsPartition

    assert ListOffsetsPartition(max_num_offsets=3).max_num_offsets == 3


def test_renamed_api_keeps_new_name() -> None:
    # 3.9's ListClientMetricsResources became ListConfigResources (same api key 74)
    assert REQUESTS[74].NAME == "ListConfigResourcesRequest"
    assert RESPONSES[74].NAME == "ListConfigResourcesResponse"
    old = sources()["3.9.1"]["request:74"]
    assert old.name == "ListClientMetricsResourcesRequest"
    assert old.versions <= frozenset(range(REQUESTS[74].MIN_VERSION, REQUESTS[74].MAX_VERSION + 1))


def test_zk_era_apis_from_old_spec() -> None:
    # 4.4.0 lists no versions of LeaderAndIsr (api key 4): the merge takes 3.9.1's, and
    # the newest spec's listeners (none: no client sends it, so it is not generated)
    (spec,) = [s for s in load_merged(SPECS) if s.kind == "request" and s.api_key == 4]
    assert min(spec.versions) == 0 and max(spec.versions) >= 7
    assert set(spec.source.values()) == {"3.9.1"}
    assert spec.listeners == frozenset()
    assert 4 not in REQUESTS
