"""Shared CLI plumbing: the global options and how a command opens Memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console

from memlane.config import Settings, load_settings

console = Console()
err_console = Console(stderr=True)


@dataclass
class CliState:
    store: str | None = None
    config: str | None = None

    def settings(self, **overrides: Any) -> Settings:
        return load_settings(self.config, **overrides)

    def open(self, **overrides: Any) -> Any:
        """Open Memory on --store, else the configured storage_path."""
        from memlane.memory import Memory

        settings = self.settings(**overrides)
        return Memory(self.store or settings.storage_url(), settings=settings)


def state(ctx: typer.Context) -> CliState:
    obj = ctx.find_root().obj
    if not isinstance(obj, CliState):
        obj = CliState()
        ctx.find_root().obj = obj
    return obj
