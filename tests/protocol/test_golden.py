"""Byte-exact encodings written by hand from the Kafka protocol specs."""

from __future__ import annotations

import pytest

from aiokproto.errors import KafkaProtocolError, UnsupportedVersionError
from aiokproto.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_request_header,
    decode_response_header,
    encode_request,
    encode_request_header,
    request_header_version,
    response_header_version,
)
from aiokproto.protocol.messages import (
    REQUESTS,
    RESPONSES,
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from aiokproto.protocol.messages.api_versions import ApiVersionsResponseApiVersion
from aiokproto.protocol.messages.metadata import MetadataRequestTopic
from aiokproto.protocol.primitives import write_nullable_string

H = bytes.fromhex
ZERO16 = bytes(16)


# --------------------------------------------------------------------------- headers


def test_request_header_v0() -> None:
    h = RequestHeader(request_api_key=18, request_api_version=0, correlation_id=1)
    assert h.encode(0) == H("0012 0000 00000001")
    out = bytearray()
    encode_request_header(out, 18, 0, 1, None, 0)
    assert out == H("0012 0000 00000001")
    assert RequestHeader.decode(H("0012 0000 00000001"), 0) == h


def test_request_header_v1() -> None:
    h = RequestHeader(request_api_key=3, request_api_version=4, correlation_id=7, client_id="ab")
    assert h.encode(1) == H("0003 0004 00000007 0002 6162")
    assert RequestHeader(client_id=None).encode(1) == H("0000 0000 00000000 ffff")
    assert RequestHeader.decode(H("0003 0004 00000007 0002 6162"), 1) == h


def test_request_header_v2_keeps_classic_client_id() -> None:
    # ClientId has "flexibleVersions": "none": an int16 length even in header v2
    h = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1, client_id="c")
    wire = H("0012 0003 00000001 0001 63 00")
    assert h.encode(2) == wire
    out = bytearray()
    encode_request_header(out, 18, 3, 1, "c", 2)
    assert out == wire
    assert RequestHeader.decode(wire, 2) == h
    # unknown tagged fields survive
    tagged = H("0012 0003 00000001 0001 63 01 05 02 abcd")
    decoded = RequestHeader.decode(tagged, 2)
    assert decoded.unknown_tagged_fields == [(5, H("abcd"))]
    assert decoded.encode(2) == tagged


def test_response_headers() -> None:
    assert ResponseHeader(correlation_id=7).encode(0) == H("00000007")
    assert ResponseHeader(correlation_id=7).encode(1) == H("00000007 00")
    assert decode_response_header(H("00000007 ffff"), 0) == (7, 4)
    assert decode_response_header(H("00000007 00 ffff"), 1) == (7, 5)
    assert decode_response_header(H("00000007 01 03 01 ff 12"), 1) == (7, 8)
    with pytest.raises(KafkaProtocolError):
        decode_response_header(H("00000007 01 03 09 ff"), 1)
    with pytest.raises(KafkaProtocolError):
        decode_response_header(H("000000"), 0)


def test_header_versions() -> None:
    # ApiVersions: flexible from v3; the request header follows, the response never does
    assert [request_header_version(18, v) for v in range(5)] == [1, 1, 1, 2, 2]
    assert [response_header_version(18, v) for v in range(5)] == [0, 0, 0, 0, 0]
    # Metadata: flexible from v9
    assert request_header_version(3, 8) == 1
    assert request_header_version(3, 9) == 2
    assert response_header_version(3, 8) == 0
    assert response_header_version(3, 9) == 1
    # Produce v0 (3.9.1 only) is not flexible
    assert request_header_version(0, 0) == 1
    # an API the client never sends has no header version: ControlledShutdown (7, the
    # one API whose v0 used request header v0) is inter-broker and not generated
    for key in (7, 52, 9999):
        with pytest.raises(UnsupportedVersionError):
            request_header_version(key, 0)


# ------------------------------------------------------------------------- messages


def test_api_versions_v0_request() -> None:
    assert ApiVersionsRequest().encode(0) == b""
    frame = encode_request(ApiVersionsRequest(), 0, correlation_id=1, client_id="c")
    assert frame == H("0000000b 0012 0000 00000001 0001 63")


def test_api_versions_v3_request() -> None:
    req = ApiVersionsRequest(client_software_name="aiokproto", client_software_version="0.1")
    body = H("0a") + b"aiokproto" + H("04") + b"0.1" + H("00")
    assert req.encode(3) == body
    frame = encode_request(req, 3, correlation_id=1, client_id="c")
    header = H("0012 0003 00000001 0001 63 00")
    assert frame == len(header + body).to_bytes(4, "big") + header + body
    assert decode_request_header(frame[4:]) == (
        RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1, client_id="c"),
        len(header),
    )
    assert ApiVersionsRequest.decode(body, 3) == req


def test_api_versions_v3_response_uses_header_v0() -> None:
    body = H("0000 02 0012 0000 0004 00 00000000 00")
    frame = H("0000002a") + body  # correlation id 42, then the body: no tag byte
    assert response_header_version(18, 3) == 0
    corr, off = decode_response_header(frame, response_header_version(18, 3))
    assert (corr, off) == (42, 4)
    resp = ApiVersionsResponse.decode(memoryview(frame)[off:], 3)
    assert resp == ApiVersionsResponse(
        api_keys=[ApiVersionsResponseApiVersion(api_key=18, min_version=0, max_version=4)]
    )
    assert resp.encode(3) == body


def test_metadata_v12_request() -> None:
    req = MetadataRequest(topics=[MetadataRequestTopic(name="a")])
    # topics: compact array of 1 {topic_id uuid, name compact nullable "a", no tags},
    # allow_auto_topic_creation true, include_topic_authorized_operations false, no tags
    body = H("02") + ZERO16 + H("02 61 00") + H("01 00 00")
    assert req.encode(12) == body
    assert MetadataRequest.decode(body, 12) == req
    frame = encode_request(req, 12, correlation_id=7, client_id="me")
    assert frame[4:] == H("0003 000c 00000007 0002 6d65 00") + body
    # v0: int32 array of classic strings
    assert req.encode(0) == H("00000001 0001 61")
    # null topics (= all topics) from v1
    assert MetadataRequest(topics=None).encode(1) == H("ffffffff")
    assert MetadataRequest(topics=None).encode(12) == H("00 01 00 00")


def test_flexible_message_with_tagged_field() -> None:
    resp = ApiVersionsResponse(finalized_features_epoch=5)
    # error_code, empty compact api_keys, throttle_time_ms, then the tagged section:
    # one field, tag 1, 8 bytes, int64 5
    wire = H("0000 01 00000000 01 01 08 0000000000000005")
    assert resp.encode(3) == wire
    assert ApiVersionsResponse.decode(wire, 3) == resp
    # at its default (-1) the tagged field is not written at all
    assert ApiVersionsResponse().encode(3) == H("0000 01 00000000 00")
    # an unknown tag is kept and written back in tag order
    wire2 = H("0000 01 00000000 02 01 08 0000000000000005 09 01 ff")
    decoded = ApiVersionsResponse.decode(wire2, 3)
    assert decoded.finalized_features_epoch == 5
    assert decoded.unknown_tagged_fields == [(9, H("ff"))]
    assert decoded.encode(3) == wire2


def test_compact_nullable_string_null() -> None:
    out = bytearray()
    write_nullable_string(out, None, True)
    assert out == H("00")
    out = bytearray()
    write_nullable_string(out, None, False)
    assert out == H("ffff")
    # MetadataResponse v12: throttle, empty brokers, cluster_id null, controller -1, no topics
    wire = H("00000000 01 00 ffffffff 01 00")
    resp = MetadataResponse(cluster_id=None)
    assert resp.encode(12) == wire
    assert MetadataResponse.decode(wire, 12) == resp
    assert MetadataResponse.decode(H("00000000 01 03 6162 ffffffff 01 00"), 12).cluster_id == "ab"


# ---------------------------------------------------------------------- version rules


def test_version_out_of_range() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"MetadataRequest.*0-13"):
        MetadataRequest().encode(99)
    with pytest.raises(UnsupportedVersionError, match="ApiVersionsResponse"):
        ApiVersionsResponse.decode(b"", -1)


def test_field_the_version_cannot_carry() -> None:
    # ClusterAuthorizedOperations exists in v8-10 only and is not ignorable
    with pytest.raises(UnsupportedVersionError, match="cluster_authorized_operations"):
        MetadataResponse(cluster_authorized_operations=5).encode(12)
    assert MetadataResponse(cluster_authorized_operations=5).encode(10)
    # ThrottleTimeMs (v3+) is ignorable: dropped from v0
    assert MetadataResponse(throttle_time_ms=100).encode(0) == MetadataResponse().encode(0)


def test_null_in_non_nullable_version() -> None:
    with pytest.raises(UnsupportedVersionError, match="topics"):
        MetadataRequest(topics=None).encode(0)
    # decoding a null where the version does not allow it
    with pytest.raises(KafkaProtocolError):
        MetadataRequest.decode(H("ffffffff"), 0)


def test_trailing_bytes_rejected() -> None:
    with pytest.raises(KafkaProtocolError, match="trailing"):
        ApiVersionsRequest.decode(b"\x00", 0)


def test_registry() -> None:
    assert REQUESTS[3] is MetadataRequest
    assert RESPONSES[18] is ApiVersionsResponse
    assert MetadataRequest.RESPONSE is MetadataResponse
    assert MetadataRequest.API_KEY == 3
    assert ApiVersionsRequest.FLEXIBLE_MIN == 3
    for key, cls in REQUESTS.items():
        assert cls.API_KEY == key
        assert cls.RESPONSE is RESPONSES[key]
        assert cls.RESPONSE.MIN_VERSION == cls.MIN_VERSION
        assert cls.RESPONSE.MAX_VERSION == cls.MAX_VERSION
