"""SASL/GSSAPI (Kerberos V5, RFC 4752) on the optional ``gssapi`` package: credentials
from a ticket cache or a keytab, the context exchange, the security-layer negotiation
(none: Kafka never uses one) and errors that say what to fix.

The GSS-API calls that may talk to the KDC (acquiring a ticket from a keytab, getting
the broker's service ticket) block: ``start_exchange`` runs them in a worker thread.
The later steps (checking the broker's reply, wrap/unwrap of the 4-byte layer
message) are local computations (about 0.1 ms each, measured) and run on the loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from aiokproto.errors import KafkaAuthenticationError, KafkaConfigError

INSTALL_HINT = 'sasl_mechanism="GSSAPI" needs the gssapi package: pip install "aiokproto[gssapi]"'

# RFC 4752 section 3.3: the security-layer bit mask's "no security layer" (integrity
# is 2, confidentiality 4; Kafka uses neither)
LAYER_NONE = 1

# MIT krb5 error codes (krb5.h) as GSS-API minor status values
_KDC_ERR_C_PRINCIPAL_UNKNOWN = -1765328378
_KDC_ERR_S_PRINCIPAL_UNKNOWN = -1765328377
_KDC_ERR_PREAUTH_FAILED = -1765328360
_AP_ERR_TKT_EXPIRED = -1765328352
_AP_ERR_SKEW = -1765328347
_KDCREP_SKEW = -1765328236
_CC_NOTFOUND = -1765328243
_REALM_UNKNOWN = -1765328230
_KDC_UNREACH = -1765328228
_KT_NOTFOUND = -1765328203
_FCC_NOFILE = -1765328189


class KerberosError(KafkaAuthenticationError):
    """SASL/GSSAPI failed on the client's side (credentials, KDC, service ticket)."""


class KerberosCredentialsError(KerberosError):
    """No usable Kerberos credentials: no ticket cache, or a keytab without the key."""


class KerberosTicketExpiredError(KerberosCredentialsError):
    """The ticket in the credentials cache has expired."""


class KerberosServicePrincipalError(KerberosError):
    """The KDC does not know the broker's service principal (service/host@REALM)."""


class KerberosClockSkewError(KerberosError):
    """This machine's clock and the KDC's differ by more than the allowed skew."""


def load_gssapi() -> ModuleType:
    """The ``gssapi`` package, or a ``KafkaConfigError`` with the install line."""
    try:
        import gssapi
    except ImportError as exc:
        raise KafkaConfigError(f"{INSTALL_HINT} ({exc})") from None
    except OSError as exc:  # the package is there, the system's libgssapi is not
        raise KafkaConfigError(f"{INSTALL_HINT}; loading it failed: {exc}") from None
    return gssapi


@dataclass(frozen=True, slots=True)
class KerberosSettings:
    """Who the client is (ticket cache or keytab) and whom it talks to."""

    service_name: str = "kafka"
    domain_name: str | None = None
    keytab: str | None = None
    principal: str | None = None
    ccache: str | None = None

    def __post_init__(self) -> None:
        for name in ("service_name", "domain_name", "keytab", "principal", "ccache"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise KafkaConfigError(
                    f"sasl_kerberos_{name} must be a non-empty str, not {value!r}"
                )
        if "@" in self.service_name or "/" in self.service_name:
            raise KafkaConfigError(
                f"sasl_kerberos_service_name is the first part of the broker's principal "
                f"(kafka for kafka/host@REALM), not {self.service_name!r}"
            )

    def service_principal(self, host: str) -> str:
        """The broker's GSS host-based service name, ``service@host`` (aiokafka's
        naming: sasl_kerberos_domain_name, else the host the client connects to)."""
        return f"{self.service_name}@{self.domain_name or host}"

    def credential_store(self) -> dict[str, str]:
        """The GSS-API credential store (MIT's gss_acquire_cred_from): with a keytab,
        tickets are got from it into a per-identity memory cache, so they are renewed
        from the keytab when they expire and the user's own cache is left alone."""
        store: dict[str, str] = {}
        if self.keytab is not None:
            store["client_keytab"] = self.keytab
            if self.ccache is None:
                who = f"{self.keytab}\0{self.principal or ''}".encode()
                store["ccache"] = f"MEMORY:aiokproto-{hashlib.sha256(who).hexdigest()[:16]}"
        if self.ccache is not None:
            store["ccache"] = self.ccache
        return store

    def check_library(self, gssapi: ModuleType) -> None:
        """A keytab or a named cache needs the credential-store extension (MIT Kerberos
        has it; Heimdal does not): refuse at construction rather than at connect."""
        if self.credential_store() and not hasattr(gssapi.raw, "acquire_cred_from"):
            raise KafkaConfigError(
                "sasl_kerberos_keytab and sasl_kerberos_ccache need the GSS-API credential "
                "store extension (MIT Kerberos), which this system's library lacks: get a "
                "ticket with kinit -kt instead and leave both unset"
            )

    def describe_credentials(self) -> str:
        if self.keytab is not None:
            return f"keytab {self.keytab}" + (f" ({self.principal})" if self.principal else "")
        if self.ccache is not None:
            return f"ticket cache {self.ccache}"
        return "the default ticket cache ($KRB5CCNAME)"


KRB5_LOGIN_MODULE = "Krb5LoginModule"
_JAAS_PAIR = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)""")
# Java's Krb5LoginModule options: the ones that say where the credentials are, and the
# ones with no meaning here (the library gets and renews tickets itself)
# (serviceName is Kafka's, read from the same entry: KerberosLogin)
_JAAS_OPTIONS = {"keyTab": "sasl_kerberos_keytab", "principal": "sasl_kerberos_principal",
                 "ticketCache": "sasl_kerberos_ccache",
                 "serviceName": "sasl_kerberos_service_name"}  # fmt: skip
_JAAS_FLAGS = frozenset(
    {"useKeyTab", "useTicketCache", "storeKey", "doNotPrompt", "renewTGT", "debug",
     "refreshKrb5Config", "isInitiator", "tryFirstPass", "useFirstPass", "storePass",
     "clearPass"}
)  # fmt: skip


def is_krb5_login_module(jaas: str) -> bool:
    """Whether a ``sasl.jaas.config`` value configures Java's Krb5LoginModule."""
    module = jaas.split(None, 1)[0] if jaas.strip() else ""
    return module.endswith(KRB5_LOGIN_MODULE)


def krb5_jaas_options(jaas: str, service_name: str | None = None) -> dict[str, str]:
    """A Java ``sasl.jaas.config`` with Krb5LoginModule as aiokproto options: keyTab,
    principal, ticketCache and serviceName become ``sasl_kerberos_keytab/principal/
    ccache/service_name``. ``ValueError`` names an option it does not know, a keytab
    login without keyTab, or a serviceName that differs from ``service_name`` (the
    config's sasl.kerberos.service.name), as Kafka refuses both."""
    values: dict[str, str] = {}
    for match in _JAAS_PAIR.finditer(jaas):
        raw = match.group(2) if match.group(2) is not None else match.group(3)
        values[match.group(1)] = re.sub(r"\\(.)", r"\1", raw)
    unknown = sorted(set(values) - set(_JAAS_OPTIONS) - _JAAS_FLAGS)
    if unknown:
        raise ValueError(f"Krb5LoginModule option(s) not understood: {', '.join(unknown)}")
    if values.get("useKeyTab", "").lower() == "true" and "keyTab" not in values:
        raise ValueError('Krb5LoginModule with useKeyTab=true needs keyTab="..."')
    jaas_service = values.get("serviceName")
    if jaas_service is not None and service_name is not None and jaas_service != service_name:
        raise ValueError(
            f"serviceName={jaas_service} differs from sasl.kerberos.service.name="
            f"{service_name}: set one of them"
        )
    out = {ours: values[java] for java, ours in _JAAS_OPTIONS.items() if java in values}
    if values.get("useKeyTab", "").lower() != "true":
        out.pop("sasl_kerberos_keytab", None)  # Java ignores keyTab without useKeyTab
    return out


def security_layer_answer(offer: bytes, authorization_id: str = "") -> bytes:
    """The client's answer to the broker's (unwrapped) security-layer offer, RFC 4752
    section 3.1: no layer, maximum message size 0, then the authorization identity."""
    if len(offer) != 4:
        raise KerberosError(
            f"GSSAPI: the broker's security-layer message is {len(offer)} bytes, not 4"
        )
    if not offer[0] & LAYER_NONE:
        raise KerberosError(
            "GSSAPI: the broker offers only an integrity or confidentiality layer "
            f"(mask {offer[0]:#04x}); Kafka uses none, so the broker is misconfigured"
        )
    return bytes([LAYER_NONE, 0, 0, 0]) + authorization_id.encode()


class GssapiMechanism:
    """The client side of RFC 4752 over an established GSS-API context: the context
    tokens, then an empty message once the context is complete, then the layer answer."""

    name = "GSSAPI"

    def __init__(
        self, context: Any, first_token: bytes, settings: KerberosSettings, target: str
    ) -> None:
        self._context = context
        self._target = target
        self._first = first_token
        self._settings = settings
        self._done = False

    def __repr__(self) -> str:
        return f"GssapiMechanism({self._target})"

    def first_message(self) -> bytes:
        return self._first

    def respond(self, challenge: bytes) -> bytes | None:
        if self._done:
            return None  # the broker's empty answer to the layer message
        gssapi = load_gssapi()
        try:
            if not self._context.complete:
                # the broker's AP-REP (mutual authentication): checked locally
                token = self._context.step(challenge)
                return bytes(token or b"")
            offer = self._context.unwrap(challenge).message
            self._done = True
            answer = security_layer_answer(bytes(offer))
            return bytes(self._context.wrap(answer, False).message)
        except gssapi.exceptions.GSSError as exc:
            error = gss_error(exc, self._settings, self._target)
            if type(error) is KerberosError:  # no known cause: the broker's bytes
                error = KerberosError(
                    f"GSSAPI: the broker's {len(challenge)}-byte reply is not a valid "
                    f"Kerberos token for {self._target} (is this a Kafka GSSAPI "
                    f"listener?) [{_gss_text(exc)}]"
                )
            raise error from exc


def _start(settings: KerberosSettings, host: str) -> GssapiMechanism:
    gssapi = load_gssapi()
    target = settings.service_principal(host)
    try:
        name = None
        if settings.principal is not None:
            name = gssapi.Name(settings.principal, gssapi.NameType.kerberos_principal)
        store = settings.credential_store()
        creds = gssapi.Credentials(name=name, usage="initiate", store=store or None)
        flags = gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity
        context = gssapi.SecurityContext(
            name=gssapi.Name(target, gssapi.NameType.hostbased_service),
            creds=creds,
            usage="initiate",
            flags=flags,
        )
        token = context.step()  # gets the service ticket from the KDC
    except gssapi.exceptions.GSSError as exc:
        raise gss_error(exc, settings, target) from exc
    return GssapiMechanism(context, bytes(token or b""), settings, target)


# Threads of their own for the KDC waits: a silent KDC holds each for its whole timeout
# (krb5.conf's), and many connections at once must not take every thread of the loop's
# default executor, which also resolves brokers' host names (getaddrinfo)
_KDC_THREADS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="aiokproto-gssapi")


async def start_exchange(settings: KerberosSettings, host: str) -> GssapiMechanism:
    """Acquire credentials and make the first token, in a worker thread (both may wait
    for the KDC)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_KDC_THREADS, _start, settings, host)


def gss_error(exc: Exception, settings: KerberosSettings, target: str) -> KerberosError:
    """A typed error naming what to fix, from a GSS-API error's Kerberos minor code."""
    minor = _signed32(getattr(exc, "min_code", 0) or 0)
    detail = _gss_text(exc)
    creds = settings.describe_credentials()
    if settings.keytab is not None and minor in (
        _FCC_NOFILE,
        _CC_NOTFOUND,
        _KT_NOTFOUND,
        _KDC_ERR_C_PRINCIPAL_UNKNOWN,
        _KDC_ERR_PREAUTH_FAILED,
    ):
        path = settings.keytab.removeprefix("FILE:")
        if not os.path.exists(path):
            return KerberosCredentialsError(
                f"GSSAPI: the keytab {settings.keytab} does not exist (sasl_kerberos_keytab) "
                f"[{detail}]"
            )
        return KerberosCredentialsError(
            f"GSSAPI: cannot log in with {creds}: check that sasl_kerberos_principal is "
            f"in the keytab (klist -kt {path}) with the KDC's current key [{detail}]"
        )
    if minor in (_FCC_NOFILE, _CC_NOTFOUND) or (
        minor == 0 and "No credentials" in detail and settings.keytab is None
    ):
        return KerberosCredentialsError(
            f"GSSAPI: no Kerberos ticket in {creds}: run kinit (or set "
            f"sasl_kerberos_keytab and sasl_kerberos_principal) [{detail}]"
        )
    if minor == _AP_ERR_TKT_EXPIRED or type(exc).__name__ == "ExpiredCredentialsError":
        return KerberosTicketExpiredError(
            f"GSSAPI: the Kerberos ticket in {creds} has expired: run kinit again, or use "
            f"a keytab (sasl_kerberos_keytab) so tickets are renewed [{detail}]"
        )
    if minor == _KDC_ERR_S_PRINCIPAL_UNKNOWN:
        principal = target.replace("@", "/", 1)
        return KerberosServicePrincipalError(
            f"GSSAPI: the KDC does not know the broker's principal {principal}@<realm>: "
            "check sasl_kerberos_service_name (the broker's sasl.kerberos.service.name) "
            "and sasl_kerberos_domain_name (the host in the broker's principal) "
            f"[{detail}]"
        )
    if minor in (_AP_ERR_SKEW, _KDCREP_SKEW):
        return KerberosClockSkewError(
            "GSSAPI: this machine's clock differs from the KDC's by more than the allowed "
            f"skew (5 minutes by default): synchronize the clocks (NTP) [{detail}]"
        )
    if minor in (_KDC_ERR_C_PRINCIPAL_UNKNOWN, _KDC_ERR_PREAUTH_FAILED):
        return KerberosCredentialsError(
            f"GSSAPI: the KDC refused the client principal of {creds}: check "
            f"sasl_kerberos_principal [{detail}]"
        )
    if minor in (_KDC_UNREACH, _REALM_UNKNOWN):
        return KerberosError(
            f"GSSAPI: cannot reach a KDC for the realm: check krb5.conf ($KRB5_CONFIG) [{detail}]"
        )
    return KerberosError(f"GSSAPI with {creds} for {target} failed: {detail}")


def _signed32(code: int) -> int:
    code &= 0xFFFFFFFF
    return code - (1 << 32) if code & 0x80000000 else code


def _gss_text(exc: Exception) -> str:
    gen = getattr(exc, "gen_message", None)
    if callable(gen):
        try:
            return str(gen())
        except Exception:
            pass
    return str(exc)
