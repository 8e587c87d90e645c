"""The CLI's Kerberos and OAuth flags mapped onto client options (no broker): flags over
the ``--config`` file, the secret from a file or the environment, and every wrong
combination a usage error (exit 2) naming the flag, or its environment variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aiokproto.cli.app import cli
from aiokproto.cli.auth import SECRET_ENV, SaslFlags, env_name
from aiokproto.cli.common import EXIT_USAGE, CliError, _settings

URL = "https://idp.example.com/oauth2/token"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule required"


def settings(sasl: SaslFlags, config: Path | None = None, **given: Any) -> dict[str, Any]:
    """The client options ``_settings`` makes of these flags."""
    kwargs: dict[str, Any] = {
        name: None
        for name in (
            "security_protocol", "sasl_mechanism", "sasl_username", "sasl_password",
            "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "client_id",
        )
    }  # fmt: skip
    kwargs.update(given)
    return _settings(
        bootstrap_server="b:9092",
        config=str(config) if config else None,
        ssl_no_check_hostname=False,
        timeout=30.0,
        output="table",
        sasl=sasl,
        **kwargs,
    ).client


def usage_error(sasl: SaslFlags, config: Path | None = None, **given: Any) -> str:
    with pytest.raises(CliError) as info:
        settings(sasl, config, **given)
    assert info.value.code == EXIT_USAGE
    return str(info.value)


@pytest.fixture
def keytab(tmp_path: Path) -> Path:
    path = tmp_path / "app.keytab"
    path.write_bytes(b"\x05\x02")  # only its existence is checked before connecting
    return path


def test_kerberos_flags_are_the_client_options_of_their_name(keytab: Path) -> None:
    pytest.importorskip("gssapi")
    flags = SaslFlags(
        {
            "--sasl-kerberos-service-name": "kafka2",
            "--sasl-kerberos-domain-name": "lb.example",
            "--sasl-kerberos-keytab": str(keytab),
            "--sasl-kerberos-principal": "app@EXAMPLE.COM",
            "--sasl-kerberos-ccache": "MEMORY:app",
        }
    )
    client = settings(flags, security_protocol="sasl_ssl", sasl_mechanism="gssapi")
    assert {k: v for k, v in client.items() if k.startswith(("sasl", "security"))} == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka2",
        "sasl_kerberos_domain_name": "lb.example",
        "sasl_kerberos_keytab": str(keytab),
        "sasl_kerberos_principal": "app@EXAMPLE.COM",
        "sasl_kerberos_ccache": "MEMORY:app",
    }


def test_kerberos_flags_override_the_config_file(keytab: Path, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
        f'sasl.jaas.config={KRB5} useKeyTab=true keyTab="/etc/old.keytab" principal="old";\n'
    )
    client = settings(SaslFlags({"--sasl-kerberos-keytab": str(keytab)}), config)
    assert client["sasl_kerberos_keytab"] == str(keytab)
    assert client["sasl_kerberos_principal"] == "old"  # the file's, not overridden


def test_oauth_flags_build_the_shipped_provider(tmp_path: Path) -> None:
    pytest.importorskip("httpx")
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")  # as echo writes it: the newline is not the secret's
    flags = SaslFlags(
        {
            "--sasl-oauthbearer-token-endpoint-url": URL,
            "--sasl-oauthbearer-client-id": "svc",
            "--sasl-oauthbearer-client-secret-file": str(secret),
            "--sasl-oauthbearer-scope": "kafka read",
        },
        secret="from-the-environment",  # the file, given on the command line, wins
    )
    client = settings(flags, security_protocol="sasl_ssl", sasl_mechanism="oauthbearer")
    tokens = client["sasl_oauth_token_provider"]
    assert (tokens.token_endpoint_url, tokens.client_id, tokens.scope) == (URL, "svc", "kafka read")
    assert tokens._secret == "s3cret"
    assert client["sasl_mechanism"] == "OAUTHBEARER"


def test_the_secret_from_the_environment_completes_a_shared_config_file(tmp_path: Path) -> None:
    pytest.importorskip("httpx")
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
        f"sasl.oauthbearer.token.endpoint.url={URL}\n"
        "sasl.oauthbearer.client.credentials.client.id=svc\nsasl.oauthbearer.scope=kafka\n"
    )
    flags = SaslFlags({"--sasl-oauthbearer-scope": "other"}, secret="s3cret")
    tokens = settings(flags, config)["sasl_oauth_token_provider"]
    assert (tokens.client_id, tokens.scope, tokens._secret) == ("svc", "other", "s3cret")


SASL = {"security_protocol": "sasl_plaintext"}


@pytest.mark.parametrize(
    ("given", "flags", "message"),
    [
        ({}, {"--sasl-kerberos-keytab": "k"},
         "--sasl-kerberos-keytab needs --sasl-mechanism GSSAPI (no --sasl-mechanism given)"),
        ({**SASL, "sasl_mechanism": "plain"}, {"--sasl-kerberos-service-name": "k"},
         "--sasl-kerberos-service-name needs --sasl-mechanism GSSAPI (the mechanism is PLAIN)"),
        ({**SASL, "sasl_mechanism": "gssapi"}, {"--sasl-oauthbearer-client-id": "c"},
         "--sasl-oauthbearer-client-id needs --sasl-mechanism OAUTHBEARER (the mechanism is "
         "GSSAPI)"),
        ({"sasl_mechanism": "gssapi"}, {},
         "--sasl-mechanism GSSAPI needs --security-protocol SASL_PLAINTEXT or SASL_SSL "
         "(the protocol is PLAINTEXT)"),
        ({**SASL, "sasl_mechanism": "gssapi"}, {"--sasl-username": "alice"},
         "--sasl-username is for PLAIN and SCRAM; GSSAPI logs in with a Kerberos ticket"),
        ({**SASL, "sasl_mechanism": "oauthbearer"}, {"--sasl-password": "pw"},
         "--sasl-password is for PLAIN and SCRAM; OAUTHBEARER logs in with an OAuth token"),
        ({**SASL, "sasl_mechanism": "gssapi"}, {"--sasl-kerberos-keytab": "/nonexistent.kt"},
         "--sasl-kerberos-keytab: no such file: /nonexistent.kt"),
        ({**SASL, "sasl_mechanism": "gssapi"}, {"--sasl-kerberos-principal": " "},
         "--sasl-kerberos-principal must not be empty"),
        ({**SASL, "sasl_mechanism": "oauthbearer"}, {},
         "--sasl-mechanism OAUTHBEARER needs --sasl-oauthbearer-token-endpoint-url and "
         "--sasl-oauthbearer-client-id"),
        ({**SASL, "sasl_mechanism": "oauthbearer"}, {"--sasl-oauthbearer-client-id": "c"},
         "the OAuth login needs --sasl-oauthbearer-token-endpoint-url"),
        ({**SASL, "sasl_mechanism": "oauthbearer"},
         {"--sasl-oauthbearer-token-endpoint-url": URL},
         "the OAuth login needs --sasl-oauthbearer-client-id"),
        ({**SASL, "sasl_mechanism": "oauthbearer"},
         {"--sasl-oauthbearer-token-endpoint-url": URL, "--sasl-oauthbearer-client-id": "c"},
         f"the OAuth login needs the client secret: set {SECRET_ENV} or pass "
         "--sasl-oauthbearer-client-secret-file FILE"),
        ({**SASL, "sasl_mechanism": "oauthbearer"},
         {"--sasl-oauthbearer-token-endpoint-url": "idp.example.com/token"},
         "--sasl-oauthbearer-token-endpoint-url must be an http(s) URL, not "
         "'idp.example.com/token'"),
        ({**SASL, "sasl_mechanism": "oauthbearer"},
         {"--sasl-oauthbearer-token-endpoint-url": URL, "--sasl-oauthbearer-client-id": "c",
          "--sasl-oauthbearer-client-secret-file": "/nonexistent/secret"},
         "--sasl-oauthbearer-client-secret-file: cannot read /nonexistent/secret: No such"),
    ],
)  # fmt: skip
def test_a_wrong_combination_is_a_usage_error_naming_the_flag(
    given: dict[str, Any], flags: dict[str, str], message: str
) -> None:
    got = usage_error(SaslFlags(flags), **given)
    assert got.startswith(message), got


def test_settings_from_the_environment_that_the_login_does_not_use_are_left_out() -> None:
    """A shell's AIOKPROTO_* variables serve every command run from it: the OAuth secret
    exported for one cluster must not break a PLAIN login to another."""
    flags = SaslFlags(
        {"--sasl-kerberos-keytab": "/nonexistent.kt", "--sasl-oauthbearer-client-id": "c"},
        from_env=frozenset({"--sasl-kerberos-keytab", "--sasl-oauthbearer-client-id"}),
        secret="s3cret",
    )
    client = settings(
        flags, **SASL, sasl_mechanism="plain", sasl_username="u", sasl_password="p"
    )
    assert not [k for k in client if "kerberos" in k or "oauth" in k]
    # the same on the command line: an error
    flags = SaslFlags({"--sasl-kerberos-keytab": "/nonexistent.kt"})
    assert usage_error(flags, **SASL, sasl_mechanism="plain").startswith(
        "--sasl-kerberos-keytab needs --sasl-mechanism GSSAPI"
    )


def test_an_empty_secret_file_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "secret"
    empty.write_text("\n")
    flags = SaslFlags(
        {
            "--sasl-oauthbearer-token-endpoint-url": URL,
            "--sasl-oauthbearer-client-id": "c",
            "--sasl-oauthbearer-client-secret-file": str(empty),
        }
    )
    message = usage_error(flags, **SASL, sasl_mechanism="oauthbearer")
    assert message == f"--sasl-oauthbearer-client-secret-file: {empty} is empty"


def test_the_mechanism_of_the_config_file_counts(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    message = usage_error(SaslFlags({"--sasl-kerberos-principal": "app"}), config)
    assert message == (
        "--sasl-kerberos-principal needs --sasl-mechanism GSSAPI (the mechanism is PLAIN)"
    )


def test_a_flag_from_the_environment_is_named_by_its_variable(tmp_path: Path) -> None:
    """The whole command (Click's parsing included), stopped by the usage error before
    it connects anywhere."""
    env: dict[str, str | None] = {
        name: None for name in ("AIOKPROTO_SASL_MECHANISM", "AIOKPROTO_CONFIG", SECRET_ENV)
    }
    env[env_name("--sasl-kerberos-keytab")] = str(tmp_path / "app.keytab")
    args = ["topics", "list", "-b", "127.0.0.1:1", "--security-protocol", "SASL_PLAINTEXT"]
    result = CliRunner().invoke(cli, [*args, "--sasl-mechanism", "GSSAPI"], env=env)
    assert result.exit_code == EXIT_USAGE, result.output
    assert (
        "AIOKPROTO_SASL_KERBEROS_KEYTAB (--sasl-kerberos-keytab): no such file: "
        f"{tmp_path / 'app.keytab'}"
    ) in result.output
