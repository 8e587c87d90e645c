"""Cluster-wide calls and SCRAM credentials against the real broker."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from aiokproto.admin import (
    AclBindingFilter,
    Admin,
    AdminBatchError,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from aiokproto.errors import (
    IllegalStateError,
    KafkaConfigError,
    ResourceNotFoundError,
    SecurityDisabledError,
    UnacceptableCredentialError,
)
from aiokproto.testing import LocalKafka
from aiokproto.testing.discovery import KafkaService

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


async def credentials_settle(
    admin: Admin, user: str, expected: set[ScramCredentialInfo] | None, limit_s: float = 15
) -> None:
    """Wait until describing ``user`` shows ``expected`` (None: the user is gone).

    An alteration returns once the controller committed it; the broker that answers the
    describe applies the metadata log a little later, so a describe right after can
    still show the old credentials (seen in CI on a loaded machine)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            described = await admin.describe_user_scram_credentials([user])
            seen: set[ScramCredentialInfo] | None = set(described[user].credential_infos)
        except AdminBatchError as error:
            if not isinstance(error.errors.get(user), ResourceNotFoundError):
                raise
            seen = None
        if seen == expected:
            return
        assert time.monotonic() < deadline, f"{user}: still {seen}, expected {expected}"
        await asyncio.sleep(0.1)


async def test_describe_cluster(admin: Admin) -> None:
    cluster = await admin.describe_cluster(include_authorized_operations=True)
    assert cluster.cluster_id
    assert [b.node_id for b in cluster.brokers] == [1]
    assert cluster.controller_id in (None, 1)
    assert cluster.authorized_operations is not None


async def test_describe_features(admin: Admin) -> None:
    features = await admin.describe_features()
    assert "metadata.version" in features.finalized_features
    assert features.finalized_features["metadata.version"].max_version_level > 0
    assert "metadata.version" in features.supported_features
    assert features.finalized_features_epoch is not None


async def test_acls_need_an_authorizer(admin: Admin) -> None:
    with pytest.raises(SecurityDisabledError):
        await admin.describe_acls(AclBindingFilter.any())


async def test_admin_options_and_lifecycle(kafka: KafkaService) -> None:
    with pytest.raises(KafkaConfigError, match="no_such_option"):
        Admin(bootstrap_servers=kafka.bootstrap_servers, no_such_option=1)
    admin = Admin(bootstrap_servers=kafka.bootstrap_servers)
    with pytest.raises(IllegalStateError):
        await admin.list_topics()
    await admin.start()
    try:
        assert isinstance(await admin.list_topics(timeout_ms=5000), list)
        with pytest.raises(KafkaConfigError):
            await admin.list_topics(timeout_ms=0)
    finally:
        await admin.close()


async def test_scram_credentials_round_trip(kafka_secure: LocalKafka) -> None:
    async with Admin(bootstrap_servers=kafka_secure.bootstrap_servers) as admin:
        known = kafka_secure.users[0].username  # created when the broker was formatted
        described = await admin.describe_user_scram_credentials([known])
        assert {c.mechanism for c in described[known].credential_infos} == {SHA256, SHA512}
        assert known in await admin.describe_user_scram_credentials()

        user, bad = f"u{uuid.uuid4().hex[:8]}", f"b{uuid.uuid4().hex[:8]}"
        with pytest.raises(AdminBatchError) as info:
            await admin.alter_user_scram_credentials(
                [
                    UserScramCredentialUpsertion(user, ScramCredentialInfo(SHA256, 4096), "pw-1"),
                    UserScramCredentialUpsertion(user, ScramCredentialInfo(SHA512, 8192), "pw-1"),
                    UserScramCredentialUpsertion(bad, ScramCredentialInfo(SHA256, 10), "pw"),
                ]
            )
        assert info.value.results == {user: None}
        assert isinstance(info.value.errors[bad], UnacceptableCredentialError)
        await credentials_settle(
            admin, user, {ScramCredentialInfo(SHA256, 4096), ScramCredentialInfo(SHA512, 8192)}
        )

    # The salted password we computed lets the user log in with SCRAM.
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        async with Admin(
            bootstrap_servers=kafka_secure.bootstrap("SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password="pw-1",
        ) as scram_admin:
            assert (await scram_admin.describe_cluster()).cluster_id

    async with Admin(bootstrap_servers=kafka_secure.bootstrap_servers) as admin:
        assert await admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, SHA512)]
        ) == {user: None}
        await credentials_settle(admin, user, {ScramCredentialInfo(SHA256, 4096)})
        await admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, SHA256)])
        await credentials_settle(admin, user, None)
        with pytest.raises(AdminBatchError) as info:
            await admin.describe_user_scram_credentials([user, known])
        assert isinstance(info.value.errors[user], ResourceNotFoundError)
        assert known in info.value.results
