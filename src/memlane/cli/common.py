"""Shared CLI plumbing: the global options and how a command opens Memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console

from memlane.config import Settings, load_settings
from memlane.errors import NotFoundError

console = Console()
# soft wrap: an error is one line however long, so scripts and logs keep it whole
err_console = Console(stderr=True, soft_wrap=True)

#: ``--store`` on a sub-command: the same as the global one, so it may also come after the command.
STORE_OPTION: Any = typer.Option(
    None, "--store", "--db",
    help="Database: a SQLite path, sqlite:///path, memory:// or postgresql://... (as the global --store).",
)


@dataclass
class CliState:
    store: str | None = None
    config: str | None = None
    key_env: str | None = None
    tenant: str | None = None

    def sid(self, session_id: str) -> str:
        """The stored key of ``session_id`` in --tenant's namespace (memlane.scoping)."""
        from memlane.scoping import session_key

        return session_key(self.tenant, session_id)

    def shown(self, key: str) -> str:
        """How a session key is shown: the tenant's own id; without --tenant, ``tenant/id``
        for a tenant other than default (keys themselves hold an unprintable separator)."""
        from memlane.scoping import public_session_id, tenant_of_key

        if self.tenant or tenant_of_key(key) == "default":
            return public_session_id(key)
        return f"{tenant_of_key(key)}/{public_session_id(key)}"

    def settings(self, **overrides: Any) -> Settings:
        return load_settings(self.config, **overrides)

    def url(self, *, create: bool = True) -> str:
        """The store to open: --store, else the configured storage_path.

        Only commands that write pass ``create``: reading a --store that does not exist is an
        error, not a new empty database (and new directories) under a mistyped path. The
        configured path is created either way, so a first ``memlane sessions`` just shows none.
        """
        from memlane.store import local_file

        if not self.store:
            return self.settings().storage_url()
        path = None if create else local_file(self.store)
        if path is not None and not path.exists():
            raise NotFoundError(
                f"no database at {path}: check --store (this command only reads; "
                "commands that write, such as memlane import or memlane demo, create it)"
            )
        return self.store

    def open(self, *, create: bool = False, **overrides: Any) -> Any:
        """Open Memory on :meth:`url` (a read, unless ``create``)."""
        from memlane.memory import Memory

        url = self.url(create=create)
        return Memory(url, settings=self.settings(**overrides), key=self.key())

    def key(self) -> str | None:
        """The key of an encrypted store, from the variable --key-env names (else key_env)."""
        import os

        from memlane.errors import ConfigError

        name = self.key_env or self.settings().key_env
        value = os.environ.get(name)
        if self.key_env and not value:
            raise ConfigError(f"--key-env {name}: the environment variable {name} is not set or empty")
        return value or None


def state(ctx: typer.Context, store: str | None = None) -> CliState:
    """The global options; a sub-command's own ``--store`` wins over the one before it."""
    obj = ctx.find_root().obj
    if not isinstance(obj, CliState):
        obj = CliState()
        ctx.find_root().obj = obj
    return CliState(store=store, config=obj.config, key_env=obj.key_env, tenant=obj.tenant) if store else obj
