"""SASL/GSSAPI without a KDC or a socket: the RFC 4752 security-layer answer, the
option checks, service principal naming, the credential store, the exchange's steps
over a scripted GSS-API context, the typed errors and the missing-extra hint."""

from __future__ import annotations

import asyncio
import builtins
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from aiokproto.config import ClientConfig
from aiokproto.errors import KafkaAuthenticationError, KafkaConfigError
from aiokproto.net import kerberos
from aiokproto.net.kerberos import (
    INSTALL_HINT,
    GssapiMechanism,
    KerberosClockSkewError,
    KerberosCredentialsError,
    KerberosError,
    KerberosServicePrincipalError,
    KerberosSettings,
    KerberosTicketExpiredError,
    gss_error,
    is_krb5_login_module,
    krb5_jaas_options,
    security_layer_answer,
)
from aiokproto.net.security import SecurityConfig

GSSAPI = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI"}


def test_layer_answer_picks_no_layer_and_size_zero() -> None:
    # the broker (Java's GssKrb5Server) offers every layer and a 64 KiB buffer
    assert security_layer_answer(bytes([7, 0x01, 0x00, 0x00])) == b"\x01\x00\x00\x00"
    assert security_layer_answer(b"\x01\xff\xff\xff") == b"\x01\x00\x00\x00"
    assert security_layer_answer(b"\x01\x00\x00\x00", "alice") == b"\x01\x00\x00\x00alice"


@pytest.mark.parametrize("offer", [b"", b"\x01\x00\x00", b"\x01\x00\x00\x00\x00"])
def test_layer_offer_of_the_wrong_length_is_refused(offer: bytes) -> None:
    with pytest.raises(KerberosError, match=f"{len(offer)} bytes, not 4"):
        security_layer_answer(offer)


@pytest.mark.parametrize("mask", [2, 4, 6])
def test_broker_demanding_a_layer_is_refused(mask: int) -> None:
    with pytest.raises(KerberosError, match="Kafka uses none"):
        security_layer_answer(bytes([mask, 0, 16, 0]))


def test_service_principal_is_service_at_domain_or_host() -> None:
    assert KerberosSettings().service_principal("b1.example") == "kafka@b1.example"
    settings = KerberosSettings(service_name="kafka2", domain_name="lb.example")
    assert settings.service_principal("10.0.0.1") == "kafka2@lb.example"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"service_name": ""}, "sasl_kerberos_service_name must be a non-empty str"),
        ({"service_name": "kafka/host"}, "first part of the broker's principal"),
        ({"service_name": "kafka@R"}, "first part of the broker's principal"),
        ({"domain_name": " "}, "sasl_kerberos_domain_name"),
        ({"keytab": 3}, "sasl_kerberos_keytab must be a non-empty str"),
        ({"principal": ""}, "sasl_kerberos_principal"),
        ({"ccache": ""}, "sasl_kerberos_ccache"),
    ],
)
def test_bad_kerberos_options_fail_at_construction(options: dict[str, Any], match: str) -> None:
    with pytest.raises(KafkaConfigError, match=match):
        KerberosSettings(**options)
    prefixed = {f"sasl_kerberos_{k}": v for k, v in options.items()}
    with pytest.raises(KafkaConfigError, match=match):
        ClientConfig(bootstrap_servers=["h:1"], **GSSAPI, **prefixed)


def test_credential_store_keeps_keytab_tickets_in_a_private_memory_cache() -> None:
    assert KerberosSettings().credential_store() == {}
    assert KerberosSettings(ccache="FILE:/c").credential_store() == {"ccache": "FILE:/c"}
    a = KerberosSettings(keytab="/k", principal="alice").credential_store()
    b = KerberosSettings(keytab="/k", principal="bob").credential_store()
    assert a["client_keytab"] == "/k" and a["ccache"].startswith("MEMORY:aiokproto-")
    assert a["ccache"] != b["ccache"]  # one cache per identity
    assert a == KerberosSettings(keytab="/k", principal="alice").credential_store()
    both = KerberosSettings(keytab="/k", ccache="FILE:/c").credential_store()
    assert both == {"client_keytab": "/k", "ccache": "FILE:/c"}


def test_keytab_and_named_cache_need_the_credential_store_extension() -> None:
    heimdal_like = types.SimpleNamespace(raw=types.SimpleNamespace())
    KerberosSettings().check_library(heimdal_like)  # type: ignore[arg-type]  # default cache
    for settings in (KerberosSettings(keytab="/k"), KerberosSettings(ccache="FILE:/c")):
        with pytest.raises(KafkaConfigError, match="credential store extension"):
            settings.check_library(heimdal_like)  # type: ignore[arg-type]
    mit_like = types.SimpleNamespace(raw=types.SimpleNamespace(acquire_cred_from=None))
    KerberosSettings(keytab="/k").check_library(mit_like)  # type: ignore[arg-type]


class ScriptedContext:
    """A GSS-API initiator context that completes after one broker token; wrap and
    unwrap are identity functions tagged so the test can see which was used."""

    def __init__(self) -> None:
        self.complete = False
        self.steps: list[bytes] = []
        self.wrapped: list[tuple[bytes, bool]] = []

    def step(self, token: bytes) -> bytes | None:
        self.steps.append(token)
        self.complete = True
        return None  # Kerberos: the AP-REP needs no answer token

    def unwrap(self, message: bytes) -> Any:
        return type("Unwrapped", (), {"message": message.removeprefix(b"W:")})

    def wrap(self, message: bytes, encrypt: bool) -> Any:
        self.wrapped.append((message, encrypt))
        return type("Wrapped", (), {"message": b"W:" + message})


def test_exchange_steps_then_sends_empty_then_answers_the_layer_offer() -> None:
    pytest.importorskip("gssapi")
    context = ScriptedContext()
    mech = GssapiMechanism(context, b"AP-REQ", KerberosSettings(), "kafka@h")
    assert mech.name == "GSSAPI" and "kafka@h" in repr(mech)
    assert mech.first_message() == b"AP-REQ"
    assert mech.respond(b"AP-REP") == b""  # context complete: an empty message
    assert context.steps == [b"AP-REP"]
    assert mech.respond(b"W:\x07\x00\x10\x00") == b"W:\x01\x00\x00\x00"
    assert context.wrapped == [(b"\x01\x00\x00\x00", False)]  # integrity only, no layer
    assert mech.respond(b"") is None  # the broker's final empty answer


class FakeGssError(Exception):
    def __init__(self, minor: int, text: str = "detail") -> None:
        super().__init__(text)
        self.min_code = minor & 0xFFFFFFFF  # python-gssapi reports it unsigned
        self.text = text

    def gen_message(self) -> str:
        return self.text


@pytest.mark.parametrize(
    ("minor", "error", "needle"),
    [
        (-1765328189, KerberosCredentialsError, "no Kerberos ticket"),  # FCC_NOFILE
        (-1765328243, KerberosCredentialsError, "run kinit"),  # CC_NOTFOUND
        (-1765328352, KerberosTicketExpiredError, "has expired"),  # TKT_EXPIRED
        (-1765328377, KerberosServicePrincipalError, "kafka/b1@<realm>"),  # S_PRINCIPAL
        (-1765328347, KerberosClockSkewError, "synchronize the clocks"),  # AP_ERR_SKEW
        (-1765328236, KerberosClockSkewError, "synchronize the clocks"),  # KDCREP_SKEW
        (-1765328378, KerberosCredentialsError, "check sasl_kerberos_principal"),
        (-1765328228, KerberosError, "cannot reach a KDC"),  # KDC_UNREACH
        (12345, KerberosError, "GSSAPI with the default ticket cache"),
    ],
)
def test_gss_errors_become_typed_errors_that_say_what_to_fix(
    minor: int, error: type[KerberosError], needle: str
) -> None:
    cause = FakeGssError(minor, "Minor: the library's words")
    got = gss_error(cause, KerberosSettings(), "kafka@b1")
    assert type(got) is error and isinstance(got, KafkaAuthenticationError)
    assert needle in str(got) and "the library's words" in str(got)


@pytest.mark.parametrize("minor", [-1765328189, -1765328243, -1765328203, -1765328378])
def test_keytab_errors_say_whether_the_file_or_the_principal_is_wrong(
    minor: int, tmp_path: Path
) -> None:
    missing = KerberosSettings(keytab=str(tmp_path / "none.keytab"), principal="app@R")
    got = gss_error(FakeGssError(minor), missing, "kafka@b1")
    assert type(got) is KerberosCredentialsError
    assert f"the keytab {tmp_path / 'none.keytab'} does not exist" in str(got)
    (tmp_path / "app.keytab").write_bytes(b"\x05\x02")
    present = KerberosSettings(keytab=f"FILE:{tmp_path / 'app.keytab'}", principal="app@R")
    got = gss_error(FakeGssError(minor), present, "kafka@b1")
    assert type(got) is KerberosCredentialsError and "kinit" not in str(got)
    assert f"keytab FILE:{tmp_path / 'app.keytab'} (app@R)" in str(got)
    assert f"klist -kt {tmp_path / 'app.keytab'}" in str(got)


def test_errors_name_the_credentials_used() -> None:
    got = gss_error(FakeGssError(-1765328352), KerberosSettings(ccache="FILE:/c"), "kafka@b1")
    assert "ticket cache FILE:/c" in str(got)


def test_krb5_login_module_options_become_ours() -> None:
    module = "com.sun.security.auth.module.Krb5LoginModule required "
    assert is_krb5_login_module(module + "useTicketCache=true;")
    assert not is_krb5_login_module("org.apache.kafka.common.security.plain.PlainLoginModule")
    assert not is_krb5_login_module("")
    assert krb5_jaas_options(
        module + 'useKeyTab=true storeKey=true keyTab="/a \\"b\\".kt" principal="u@R";'
    ) == {"sasl_kerberos_keytab": '/a "b".kt', "sasl_kerberos_principal": "u@R"}
    # unquoted values, a ticket cache, and a keyTab Java would ignore without useKeyTab
    assert krb5_jaas_options(
        module + "useTicketCache=true ticketCache=/tmp/cc keyTab=/k principal=u@R;"
    ) == {"sasl_kerberos_ccache": "/tmp/cc", "sasl_kerberos_principal": "u@R"}
    with pytest.raises(ValueError, match="needs keyTab"):
        krb5_jaas_options(module + "useKeyTab=true;")
    with pytest.raises(ValueError, match="not understood: keytab, useKeytab"):
        krb5_jaas_options(module + "keytab=/k useKeytab=true;")


def test_krb5_login_module_service_name_is_kafkas_and_must_agree() -> None:
    # Kafka's own clients read serviceName from the Krb5LoginModule entry (the form of
    # its older docs' JAAS files), and refuse one that differs from the config's
    module = 'com.sun.security.auth.module.Krb5LoginModule required serviceName="kafka2" '
    jaas = module + "useTicketCache=true;"
    assert krb5_jaas_options(jaas) == {"sasl_kerberos_service_name": "kafka2"}
    assert krb5_jaas_options(jaas, "kafka2") == {"sasl_kerberos_service_name": "kafka2"}
    with pytest.raises(ValueError, match=r"serviceName=kafka2 differs from sasl\.kerberos"):
        krb5_jaas_options(jaas, "kafka")


def test_without_the_gssapi_package_construction_fails_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_gssapi(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "gssapi" or name.startswith("gssapi."):
            raise ImportError("No module named 'gssapi'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "gssapi", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_gssapi)
    with pytest.raises(KafkaConfigError) as caught:
        SecurityConfig(**GSSAPI)
    assert INSTALL_HINT in str(caught.value)
    assert 'pip install "aiokproto[gssapi]"' in str(caught.value)
    # other mechanisms do not need it
    SecurityConfig(security_protocol="SASL_PLAINTEXT", sasl_plain_username="u",
                   sasl_plain_password="p")  # fmt: skip
    with pytest.raises(KafkaConfigError, match="aiokproto\\[gssapi\\]"):
        kerberos.load_gssapi()


async def test_kdc_waits_do_not_take_the_loops_default_executor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a silent KDC holds each exchange's thread for its whole timeout: many connections
    # at once must not take every thread of the loop's default executor, which
    # create_connection needs for getaddrinfo (a broker's host name)
    release = threading.Event()

    def stuck(settings: KerberosSettings, host: str) -> GssapiMechanism:
        release.wait(10)
        raise KerberosError("KDC did not answer")

    monkeypatch.setattr(kerberos, "_start", stuck)
    waiting = [
        asyncio.create_task(kerberos.start_exchange(KerberosSettings(), f"b{i}")) for i in range(40)
    ]
    try:
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        infos = await asyncio.wait_for(loop.getaddrinfo("localhost", 9092), 2)
        assert infos
    finally:
        release.set()
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_gssapi_without_a_sasl_protocol_is_refused_at_construction(protocol: str) -> None:
    # security_protocol left at PLAINTEXT (or SSL) with GSSAPI chosen would connect
    # without authenticating at all: the keytab and principal silently unused
    with pytest.raises(KafkaConfigError, match=f'SASL_PLAINTEXT or SASL_SSL, not "{protocol}"'):
        SecurityConfig(
            security_protocol=protocol, sasl_mechanism="GSSAPI", sasl_kerberos_keytab="/k"
        )
    with pytest.raises(KafkaConfigError, match="SASL_PLAINTEXT or SASL_SSL"):
        ClientConfig(bootstrap_servers=["h:1"], sasl_mechanism="GSSAPI")


def test_a_garbage_token_from_the_broker_is_named_as_the_brokers() -> None:
    # a broker (or something else on its port) answering the exchange with bytes that
    # are not a Kerberos token: the error says it was the broker's reply, not the
    # client's credentials, that failed
    gssapi = pytest.importorskip("gssapi")

    class Rejecting(ScriptedContext):
        def step(self, token: bytes) -> bytes | None:
            raise gssapi.exceptions.GSSError(589824, 0)  # GSS_S_DEFECTIVE_TOKEN

    mech = GssapiMechanism(Rejecting(), b"AP-REQ", KerberosSettings(), "kafka@b1")
    with pytest.raises(KerberosError, match="the broker's 7-byte reply is not a valid") as got:
        mech.respond(b"garbage")
    assert type(got.value) is KerberosError and "kafka@b1" in str(got.value)
