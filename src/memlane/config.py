"""Settings from ``~/.memlane/config.yaml`` (or ``--config``) and ``MEMLANE_*`` variables.

Precedence: explicit arguments > environment > config file > defaults. The
file may hold the keys at top level or under a ``memory:`` section, so the
seed projects' config blocks (``memory: {enabled, storage_path, ...}``) work
as they are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memlane.errors import ConfigError
from memlane.seed_config import map_seed_blocks

DEFAULT_HOME = Path("~/.memlane")
DEFAULT_CONFIG = DEFAULT_HOME / "config.yaml"


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = True
    storage_path: str = str(DEFAULT_HOME / "memory.db")
    max_history_tokens: int = Field(4096, ge=1)
    auto_prune_days: int | None = Field(None, ge=1)
    strategy: Literal["simple", "summary", "summarization", "hybrid", "tiered"] = "hybrid"
    token_model: str | None = None
    auto_create_sessions: bool = True
    on_storage_error: Literal["raise", "log"] = "raise"
    durability: Literal["full", "normal"] = "full"
    max_message_chars: int = Field(1_000_000, ge=1)
    embedder: str | None = "minilm"
    anchor_id: str | None = None
    checkpoint_dir: str | None = None
    # "sync": the turn's checkpoint is written before store_interaction returns (PRD-014 §7);
    # "background": after it, on the summary thread (cheaper; hydration replays the log)
    checkpoint_per_turn: Literal["sync", "background"] = "sync"
    summarize_every: int = Field(10, ge=1)
    keep_raw_turns: int = Field(3, ge=0)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key_env: str = "OPENAI_API_KEY"
    # rooms, the Anchor and long-term notes (rooms/, notes/)
    anchor_name: str | None = None
    cli_session_id: str = "cli"
    notes_enabled: bool = True
    promote_every: int = Field(5, ge=1)
    notes_min_importance: float = Field(0.5, ge=0.0, le=1.0)
    notes_extractor: Literal["rules", "llm"] = "rules"
    # lifecycle limits enforced by `memlane maintain` (None = no limit)
    max_turns_per_session: int | None = Field(None, ge=1)
    max_sessions: int | None = Field(None, ge=1)
    archive_after_days: int | None = Field(90, ge=0)  # 0 or None: never archive
    maintain_every_minutes: int | None = Field(None, ge=1)
    # session management (state/sessions.py): idle expiry, per-user cap, topic splitting
    session_idle_timeout_minutes: float = Field(60.0, gt=0)
    max_active_sessions_per_user: int = Field(10, ge=1)
    split_on_topic_change: bool = False
    topic_change_threshold: float = Field(0.35, ge=0.0, le=1.0)  # state/topic_shift.DEFAULT_THRESHOLD
    # context packet sections in priority order (None: the engine's default order); a
    # comma-separated string works too, so MEMLANE_CONTEXT_PRIORITIES=recent,notes does
    context_priorities: list[str] | None = None
    # seed 001's rag block (memlane.seed_config maps it): recall into the context packet,
    # how many earlier messages, and the calibrated relevance floor (0-1) they must reach
    rag_enabled: bool = True
    rag_top_k: int = Field(8, ge=1, le=100)
    rag_min_score: float | None = Field(None, ge=0.0, le=1.0)
    # Host names the server answers to (DNS-rebinding protection). None: the loopback
    # names when bound to loopback (127.0.0.1, localhost, ::1), no check otherwise.
    # Comma-separated works too: MEMLANE_ALLOWED_HOSTS=memory.internal,127.0.0.1
    allowed_hosts: list[str] | None = None
    # The environment variable holding the key of an encrypted SQLite store (SQLCipher,
    # the `encryption` extra). The key itself is never a setting: it is not written to
    # config files or shown by `memlane config`.
    key_env: str = "MEMLANE_KEY"
    # Tenants whose API keys may read /metrics (which counts every tenant's traffic) when
    # the server requires keys: `memlane keys create --tenant admin` makes such a key.
    admin_tenants: list[str] = Field(default_factory=lambda: ["admin"])

    @field_validator("allowed_hosts", "admin_tenants", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [h.strip().lower() for h in value.split(",") if h.strip()]
        return value

    @field_validator("context_priorities", mode="before")
    @classmethod
    def _split_priorities(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        if value is not None:
            # Checked here, so a typo fails when the config is read, not at the first packet.
            from memlane.errors import InvalidInputError
            from memlane.models import check_priorities

            try:
                value = list(check_priorities(value))
            except InvalidInputError as exc:
                raise ValueError(str(exc)) from exc
        return value

    def storage_url(self) -> str:
        path = self.storage_path
        if "://" in path:
            return path
        return str(Path(path).expanduser())


_ENV_PREFIX = "MEMLANE_"


def _env_overrides(env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fields = Settings.model_fields
    for key, value in env.items():
        if not key.startswith(_ENV_PREFIX):
            continue
        name = key[len(_ENV_PREFIX):].lower()
        if name == "anchor_id" or name in fields:
            out[name] = value
    # Seed 003 configures the Anchor as MATRIX_USER_ID; honour it when ours is unset.
    if "anchor_id" not in out and env.get("MATRIX_USER_ID"):
        out["anchor_id"] = env["MATRIX_USER_ID"]
    return out


def load_settings(
    config_path: str | Path | None = None,
    *,
    env: dict[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Read settings; a bad file or value raises ConfigError that names it."""
    environ = dict(os.environ if env is None else env)
    path = Path(config_path or environ.get("MEMLANE_CONFIG") or DEFAULT_CONFIG).expanduser()
    data: dict[str, Any] = {}
    if path.exists():
        import yaml  # only when there is a file to read: most processes have none

        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping of settings")
        section = loaded.get("memory", loaded)
        if not isinstance(section, dict):
            raise ConfigError(f"'memory' in {path} must be a mapping")
        data.update(map_seed_blocks(dict(section)))
    elif config_path is not None:
        raise ConfigError(f"config file {path} does not exist")
    data.update(_env_overrides(environ))
    data.update(map_seed_blocks({k: v for k, v in overrides.items() if v is not None}))
    try:
        return Settings(**data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid memlane settings ({path}): {problems}") from exc
