"""Java ``client.properties`` files: syntax, Java names mapped to ours, errors naming
the file and the line."""

from __future__ import annotations

import pytest

from aiokproto.cli.config_file import (
    PropertiesError,
    known_java_names,
    load_properties,
    map_java,
    parse_properties,
)


def test_properties_syntax() -> None:
    text = (
        "# comment\n! also a comment\n\n"
        "a=1\n  b : two words \nc value\nd=x\\\n   y\ne=tab\\there\nf=\\u0041\ng\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "two words ", "c": "value", "d": "xy", "e": "tab\there", "f": "A", "g": "",
    }


def test_java_names_map_to_ours() -> None:
    opts = map_java({
        "bootstrap.servers": "h1:9092,h2:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
        'required username="alice" password="s\\"cret";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "",
        "request.timeout.ms": "5000",
        "acks": "all",
        "linger.ms": "10",
        "enable.idempotence": "false",
        "group.id": "g",
        "isolation.level": "read_committed",
        "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
    })
    assert opts.client == {
        "bootstrap_servers": "h1:9092,h2:9092",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 's"cret',
        "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": False,
        "request_timeout_ms": 5000,
    }
    assert opts.producer == {"acks": "all", "linger_ms": 10, "enable_idempotence": False}
    assert opts.consumer == {"group_id": "g", "isolation_level": "read_committed"}


def test_kerberos_names_and_the_krb5_login_module_map_to_ours() -> None:
    opts = map_java(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka2",
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useKeyTab=true storeKey=true keyTab="/etc/app.keytab" principal="app@EX.COM";',
        }
    )
    assert opts.client == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka2",
        "sasl_kerberos_keytab": "/etc/app.keytab",
        "sasl_kerberos_principal": "app@EX.COM",
    }
    cache = map_java(
        {
            "sasl.kerberos.domain.name": "lb.example",
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useTicketCache=true ticketCache="/tmp/cc";',
        }
    )
    assert cache.client == {
        "sasl_kerberos_domain_name": "lb.example",
        "sasl_kerberos_ccache": "/tmp/cc",
    }
    old_style = map_java(
        {
            "sasl.kerberos.service.name": "kafka2",
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useTicketCache=true serviceName="kafka2";',
        }
    )
    assert old_style.client == {"sasl_kerberos_service_name": "kafka2"}
    with pytest.raises(PropertiesError, match="serviceName=kafka2 differs"):
        map_java(
            {
                "sasl.kerberos.service.name": "kafka",
                "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
                "serviceName=kafka2;",
            }
        )


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"foo.bar": "1", "bootstrap.servers": "h:1"}, "unknown property: foo.bar"),
        ({"ssl.truststore.location": "/ts.jks"}, "only PEM files"),
        ({"request.timeout.ms": "soon"}, "request.timeout.ms: expected a whole number"),
        ({"enable.idempotence": "yes"}, "expected true or false"),
        ({"sasl.jaas.config": "org.example.CustomLoginModule required;"},
         "only PlainLoginModule"),
        ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
                              "useKeyTab=true;"}, "needs keyTab"),
        ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
                              "keytab=x;"}, "not understood: keytab"),
        ({"partitioner.class": "x"}, "unknown property: partitioner.class"),
    ],
)
def test_bad_properties_are_named(props: dict[str, str], message: str) -> None:
    with pytest.raises(PropertiesError, match=message):
        map_java(props)


def test_load_properties_names_the_file(tmp_path: object) -> None:
    with pytest.raises(PropertiesError, match="cannot read config file"):
        load_properties("/nonexistent/client.properties")
    assert "bootstrap.servers" in known_java_names()
