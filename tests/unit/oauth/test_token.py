"""The OAuth login's pure logic: Java's refresh schedule, the retry backoff, token
answers and JWT claims (no sockets)."""

from __future__ import annotations

import base64
import json

import pytest

from aiokproto.errors import KafkaAuthenticationError, KafkaConfigError
from aiokproto.oauth.token import (
    OAuthTokenError,
    RefreshConfig,
    backoff_s,
    error_text,
    jwt_claims,
    parse_token_response,
    refresh_at,
)

JAVA = RefreshConfig()
URL = "https://idp.example/token"


def jwt(claims: dict[str, object]) -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


def answer(**doc: object) -> bytes:
    return json.dumps(doc).encode()


def test_java_defaults() -> None:
    assert (JAVA.window_factor, JAVA.window_jitter) == (0.8, 0.05)
    assert (JAVA.min_period_s, JAVA.buffer_s) == (60, 300)


def test_an_hour_token_refreshes_at_80_to_85_percent() -> None:
    # 3600 s: 0.8-0.85 of the lifetime is 2880-3060 s, before the 300 s buffer
    assert refresh_at(0, 3600, 0, JAVA, 0.0) == pytest.approx(2880)
    assert refresh_at(0, 3600, 0, JAVA, 0.999999) == pytest.approx(3060, abs=0.01)


def test_the_buffer_moves_the_refresh_earlier() -> None:
    # 1000 s: 80% is 800 s, but that leaves less than 300 s: refresh at 700 s
    assert refresh_at(0, 1000, 0, JAVA, 0.0) == 700


def test_the_minimum_period_delays_the_refresh() -> None:
    # issued long ago, fetched now: the 80% point has passed; wait at least 60 s
    assert refresh_at(0, 10_000, 9_000, JAVA, 0.0) == 9_060


def test_a_short_token_ignores_buffer_and_minimum_period() -> None:
    # 6 s left: 60 + 300 exceeds it, so the fraction of what is left applies
    assert refresh_at(100, 106, 100, JAVA, 0.0) == pytest.approx(104.8)
    assert refresh_at(100, 106, 100, JAVA, 1.0) == pytest.approx(105.1)


def test_an_expired_token_refreshes_now() -> None:
    assert refresh_at(0, 50, 60, JAVA, 0.5) == 60


def test_an_issued_at_in_the_future_counts_from_now() -> None:
    assert refresh_at(5000, 3600 + 100, 100, JAVA, 0.0) == pytest.approx(100 + 3600 * 0.8)


@pytest.mark.parametrize(
    ("field", "value"),
    [("window_factor", 0.4), ("window_jitter", 0.3), ("min_period_s", 901), ("buffer_s", -1)],
)
def test_out_of_range_settings_name_the_java_property(field: str, value: float) -> None:
    with pytest.raises(KafkaConfigError, match=r"sasl\.login\.refresh\."):
        RefreshConfig(**{field: value})


def test_backoff_doubles_up_to_the_maximum() -> None:
    waits = [backoff_s(n, 100, 1000) for n in range(1, 7)]
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff_s(200, 100, 10_000) == 10.0  # no overflow


def test_expiry_comes_from_the_jwt_exp_claim() -> None:
    token = jwt({"sub": "svc", "aud": "kafka", "iat": 1000, "exp": 1600})
    got = parse_token_response(answer(access_token=token, expires_in=9999), 1001, URL)
    assert (got.issued_at, got.expiry) == (1000, 1600)
    assert got.claims == {"sub": "svc", "aud": "kafka", "iat": 1000, "exp": 1600}
    assert token not in repr(got)


def test_an_opaque_token_expires_after_expires_in() -> None:
    got = parse_token_response(answer(access_token="opaque", expires_in="120"), 50, URL)
    assert (got.value, got.issued_at, got.expiry, got.claims) == ("opaque", 50, 170, {})


@pytest.mark.parametrize("expires_in", [None, 0, -5, "soon", True])
def test_no_usable_expiry_is_an_error(expires_in: object) -> None:
    doc = {"access_token": "opaque", "token_type": "Bearer"}
    if expires_in is not None:
        doc["expires_in"] = expires_in
    with pytest.raises(OAuthTokenError, match="has no expiry") as info:
        parse_token_response(json.dumps(doc).encode(), 0, URL)
    assert isinstance(info.value, KafkaAuthenticationError)


def test_a_jwt_without_exp_falls_back_to_expires_in() -> None:
    token = jwt({"sub": "svc"})
    assert parse_token_response(answer(access_token=token, expires_in=30), 10, URL).expiry == 40


@pytest.mark.parametrize("exp", ["NaN", "Infinity"])
def test_a_non_finite_exp_is_not_an_expiry(exp: str) -> None:
    token = jwt({"sub": "svc", "exp": 0}).split(".")
    token[1] = base64.urlsafe_b64encode(f'{{"exp": {exp}}}'.encode()).rstrip(b"=").decode()
    got = parse_token_response(answer(access_token=".".join(token), expires_in=30), 10, URL)
    assert got.expiry == 40  # expires_in, as for a JWT without exp


def test_an_already_expired_token_names_the_clock() -> None:
    token = jwt({"exp": 100})
    with pytest.raises(OAuthTokenError, match="clock"):
        parse_token_response(answer(access_token=token), 200, URL)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"<html>login</html>", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not an object"),
        (answer(token="x"), "without a usable access_token"),
        (answer(access_token=""), "without a usable access_token"),
        (answer(access_token="a b"), "without a usable access_token"),
        (answer(access_token="x", expires_in=5, token_type="mac"), "Bearer"),
    ],
)
def test_garbage_answers_are_errors(body: bytes, match: str) -> None:
    with pytest.raises(OAuthTokenError, match=match) as info:
        parse_token_response(body, 0, URL)
    assert info.value.status == 200


@pytest.mark.parametrize("token", ["opaque", "a.b", "a.!!!.c", f"a.{'W10'}.c"])
def test_non_jwts_have_no_claims(token: str) -> None:
    assert jwt_claims(token) is None


def test_error_text_reads_rfc6749_errors() -> None:
    assert error_text(answer(error="invalid_client")) == "invalid_client"
    assert error_text(answer(error="invalid_scope", error_description="no")) == "invalid_scope: no"
    assert error_text(b"Bad Gateway") == "'Bad Gateway'"
