"""OAuth 2.0 client-credentials login for OAUTHBEARER (``pip install 'aiokproto[oauth]'``):
``OAuthClientCredentials`` fetches and refreshes tokens from an OIDC token endpoint,
``from_java_config`` builds one from Java's ``sasl.oauthbearer.*`` / ``sasl.login.*``
settings."""

from aiokproto.oauth.java_config import from_java_config
from aiokproto.oauth.provider import OAuthClientCredentials
from aiokproto.oauth.token import OAuthTokenError, RefreshConfig

__all__ = ["OAuthClientCredentials", "OAuthTokenError", "RefreshConfig", "from_java_config"]
