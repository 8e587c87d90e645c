"""Admin SCRAM credential methods (derivation itself is in ``scram``)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aiokproto.admin import codecs
from aiokproto.admin.base import AdminBase, Outcome, _error
from aiokproto.admin.batch_error import AdminBatchError
from aiokproto.admin.scram import new_salt, salted_password
from aiokproto.admin.types import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from aiokproto.errors import KafkaConfigError, KafkaError
from aiokproto.protocol.base import Request

if TYPE_CHECKING:
    from aiokproto.protocol.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequestScramCredentialDeletion as _Deletion,
    )
    from aiokproto.protocol.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequestScramCredentialUpsertion as _Upsertion,
    )


class ScramMixin(AdminBase):
    """User SCRAM credentials, described and altered."""

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout_ms: int | None = None
    ) -> dict[str, UserScramCredentialsDescription]:
        """SCRAM mechanisms and iteration counts per user (all users by default)."""
        timeout = self._timeout(timeout_ms)
        names = None if users is None else list(dict.fromkeys(users))
        DS = codecs.describe_user_scram_credentials

        async def send(pending: list[str] | None) -> Outcome[str, Any]:
            def build(version: int) -> Request:
                return DS.DescribeUserScramCredentialsRequest(
                    users=None
                    if pending is None
                    else [DS.DescribeUserScramCredentialsRequestUserName(name=u) for u in pending]
                )

            _, response = await self._send(
                self._any_node(), DS.DescribeUserScramCredentialsRequest, build
            )
            if response.error_code:
                raise _error(response.error_code, response.error_message, "SCRAM credentials")
            return {
                r.user: (
                    _error(r.error_code, r.error_message, f"user {r.user!r}")
                    if r.error_code
                    else UserScramCredentialsDescription(
                        r.user,
                        tuple(
                            ScramCredentialInfo(ScramMechanism.from_code(c.mechanism), c.iterations)
                            for c in r.credential_infos
                        ),
                    )
                )
                for r in response.results
            }

        if names is not None:
            return await self._batch("describe_user_scram_credentials", names, send, timeout)
        outcome = await self._single("describe_user_scram_credentials", lambda: send(None), timeout)
        return {k: v for k, v in outcome.items() if not isinstance(v, KafkaError)}

    async def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        timeout_ms: int | None = None,
    ) -> dict[str, None]:
        """Upsert or delete SCRAM credentials; results by user.

        The password never leaves this process: only the salted password is sent.
        """
        timeout = self._timeout(timeout_ms)
        upserts: list[_Upsertion] = []
        deletes: list[_Deletion] = []
        for alt in alterations:
            if isinstance(alt, UserScramCredentialUpsertion):
                info = alt.credential_info
                salt = alt.salt or new_salt()
                upserts.append(
                    codecs.alter_user_scram_credentials.AlterUserScramCredentialsRequestScramCredentialUpsertion(
                        name=alt.user,
                        mechanism=info.mechanism.value,
                        iterations=info.iterations,
                        salt=salt,
                        salted_password=salted_password(
                            info.mechanism, alt.password, salt, info.iterations
                        ),
                    )
                )
            elif isinstance(alt, UserScramCredentialDeletion):
                deletes.append(
                    codecs.alter_user_scram_credentials.AlterUserScramCredentialsRequestScramCredentialDeletion(
                        name=alt.user, mechanism=alt.mechanism.value
                    )
                )
            else:
                raise KafkaConfigError(f"not a SCRAM upsertion or deletion: {alt!r}")
        # The broker takes one alteration per user per request (DUPLICATE_RESOURCE
        # otherwise), so a user's second alteration goes in a second round.
        per_user: dict[str, list[Any]] = defaultdict(list)
        for deletion in deletes:
            per_user[deletion.name].append(deletion)
        for upsertion in upserts:
            per_user[upsertion.name].append(upsertion)
        results: dict[str, None] = {}
        errors: dict[str, KafkaError] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout / 1000
        for round_no in range(max((len(v) for v in per_user.values()), default=0)):
            batch = {
                user: alts[round_no]
                for user, alts in per_user.items()
                if round_no < len(alts) and user not in errors
            }
            if not batch:
                break
            left_ms = max(1, int((deadline - loop.time()) * 1000))
            try:
                results.update(await self._scram_round(batch, left_ms))
            except AdminBatchError as exc:
                results.update(exc.results)
                errors.update(exc.errors)
        for user in errors:
            results.pop(user, None)
        if errors:
            raise AdminBatchError("alter_user_scram_credentials", results, errors)
        return results

    async def _scram_round(self, batch: dict[str, Any], timeout_ms: int) -> dict[str, None]:
        Upsertion = (
            codecs.alter_user_scram_credentials.AlterUserScramCredentialsRequestScramCredentialUpsertion
        )

        async def attempt(pending: list[str]) -> Outcome[str, None]:
            wires = [batch[user] for user in pending]
            request = codecs.alter_user_scram_credentials.AlterUserScramCredentialsRequest(
                upsertions=[w for w in wires if isinstance(w, Upsertion)],
                deletions=[w for w in wires if not isinstance(w, Upsertion)],
            )
            _, response = await self._send(
                self._controller(),
                codecs.alter_user_scram_credentials.AlterUserScramCredentialsRequest,
                lambda v: request,
            )
            return {
                r.user: (
                    _error(r.error_code, r.error_message, f"user {r.user!r}")
                    if r.error_code
                    else None
                )
                for r in response.results
            }

        return await self._batch("alter_user_scram_credentials", batch, attempt, timeout_ms)
