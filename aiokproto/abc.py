"""The abstract classes aiokafka keeps in ``aiokafka.abc``, under the same names, so
that ``from aiokafka.abc import ...`` moves over by renaming the package."""

from __future__ import annotations

import abc

from aiokproto.consumer.listener import ConsumerRebalanceListener

__all__ = ["AbstractTokenProvider", "ConsumerRebalanceListener"]


class AbstractTokenProvider(abc.ABC):
    """What ``sasl_oauth_token_provider`` takes for OAUTHBEARER (any object with an
    async ``token()`` does; subclassing this is optional)."""

    @abc.abstractmethod
    async def token(self) -> str:
        """A fresh bearer token; called for every authentication (and re-authentication)."""

    def extensions(self) -> dict[str, str]:
        """SASL extensions sent with the token (KIP-342); none by default."""
        return {}
