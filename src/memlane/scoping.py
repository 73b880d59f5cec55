"""Session ids are per tenant: the key a session is stored under.

Two tenants may both have a session "support-42": the store keeps tenant "acme"'s as
``"acme\\x1fsupport-42"`` and the default tenant's as plain ``"support-42"`` (so a store
with one tenant, the usual case, keeps the ids it was given). The separator is the ASCII
unit separator, a control character no id may contain (validation.check_identifier), so
keys of different tenants never collide and no caller can spell another tenant's key.

The library (``Memory``) addresses sessions by key: ``mem.create_session(session_id="x",
tenant_id="acme")`` returns ``session_key("acme", "x")``. The server maps the ids an API
key's caller sends to keys of the key's tenant and back (server/tenancy.py), so a tenant
sees and uses only its own plain ids.
"""

from __future__ import annotations

__all__ = ["DEFAULT_TENANT", "SEPARATOR", "public_session_id", "session_key", "tenant_of_key"]

DEFAULT_TENANT = "default"
SEPARATOR = "\x1f"


def session_key(tenant: str | None, session_id: str) -> str:
    """The key tenant ``tenant``'s session ``session_id`` is stored under."""
    if not tenant or tenant == DEFAULT_TENANT or session_id.startswith(f"{tenant}{SEPARATOR}"):
        return session_id
    return f"{tenant}{SEPARATOR}{session_id}"


def tenant_of_key(key: str) -> str:
    """The tenant a key belongs to (its prefix; the default tenant's keys have none)."""
    tenant, sep, _ = key.partition(SEPARATOR)
    return tenant if sep else DEFAULT_TENANT


def public_session_id(key: str) -> str:
    """The id the session's tenant knows it by: the key without its tenant prefix."""
    _, sep, rest = key.partition(SEPARATOR)
    return rest if sep else key
