"""Settings from ``~/.memlane/config.yaml`` (or ``--config``) and ``MEMLANE_*`` variables.

Precedence: explicit arguments > environment > config file > defaults. The
file may hold the keys at top level or under a ``memory:`` section, so the
seed projects' config blocks (``memory: {enabled, storage_path, ...}``) work
as they are.

:class:`Settings` is a plain dataclass; pydantic checks it at the edge. The checking
model is built from the dataclass's fields (their ``metadata`` holds the bounds) the
first time a value differs from its default, so a process on default settings (most
scripts, every ``memlane`` call without a config file) never imports pydantic: it costs
more than everything else a first write needs (``memlane bench cold``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memlane.errors import ConfigError
from memlane.seed_config import map_seed_blocks

if TYPE_CHECKING:
    from pydantic import BaseModel

DEFAULT_HOME = Path("~/.memlane")
DEFAULT_CONFIG = DEFAULT_HOME / "config.yaml"

__all__ = ["DEFAULT_CONFIG", "DEFAULT_HOME", "Settings", "load_settings"]


def _bounds(**limits: float) -> dict[str, float]:
    """Field metadata: pydantic's numeric bounds (ge, gt, le) of a setting."""
    return limits


@dataclass(eq=True)
class Settings:
    """Every setting, with its default. Values other than the defaults are checked (and
    coerced, "2048" -> 2048) when the object is made; a bad one raises ConfigError naming it.
    Assigning an attribute is checked the same way."""

    enabled: bool = True
    storage_path: str = str(DEFAULT_HOME / "memory.db")
    max_history_tokens: int = field(default=4096, metadata=_bounds(ge=1))
    auto_prune_days: int | None = field(default=None, metadata=_bounds(ge=1))
    strategy: Literal["simple", "summary", "summarization", "hybrid", "tiered"] = "hybrid"
    token_model: str | None = None
    auto_create_sessions: bool = True
    on_storage_error: Literal["raise", "log"] = "raise"
    durability: Literal["full", "normal"] = "full"
    max_message_chars: int = field(default=1_000_000, metadata=_bounds(ge=1))
    embedder: str | None = "minilm"
    anchor_id: str | None = None
    checkpoint_dir: str | None = None
    # "sync": the turn's checkpoint is written before store_interaction returns (PRD-014 §7);
    # "background": after it, on the summary thread (cheaper; hydration replays the log)
    checkpoint_per_turn: Literal["sync", "background"] = "sync"
    summarize_every: int = field(default=10, metadata=_bounds(ge=1))
    keep_raw_turns: int = field(default=3, metadata=_bounds(ge=0))
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key_env: str = "OPENAI_API_KEY"
    # the response cache (context/answers.py): `memlane chat` answers a question asked again
    # in the same context from it; entries expire after this many seconds (None: never)
    response_cache: bool = True
    response_cache_ttl_seconds: float | None = field(default=7 * 86_400.0, metadata=_bounds(gt=0))
    # rooms, the Anchor and long-term notes (rooms/, notes/)
    anchor_name: str | None = None
    cli_session_id: str = "cli"
    notes_enabled: bool = True
    promote_every: int = field(default=5, metadata=_bounds(ge=1))
    notes_min_importance: float = field(default=0.5, metadata=_bounds(ge=0.0, le=1.0))
    notes_extractor: Literal["rules", "llm"] = "rules"
    # lifecycle limits enforced by `memlane maintain` (None = no limit)
    max_turns_per_session: int | None = field(default=None, metadata=_bounds(ge=1))
    max_sessions: int | None = field(default=None, metadata=_bounds(ge=1))
    archive_after_days: int | None = field(default=90, metadata=_bounds(ge=0))  # 0 or None: never archive
    maintain_every_minutes: int | None = field(default=None, metadata=_bounds(ge=1))
    # session management (state/sessions.py): idle expiry, per-user cap, topic splitting
    session_idle_timeout_minutes: float = field(default=60.0, metadata=_bounds(gt=0))
    max_active_sessions_per_user: int = field(default=10, metadata=_bounds(ge=1))
    split_on_topic_change: bool = False
    # state/topic_shift.DEFAULT_THRESHOLD
    topic_change_threshold: float = field(default=0.35, metadata=_bounds(ge=0.0, le=1.0))
    # context packet sections in priority order (None: the engine's default order); a
    # comma-separated string works too, so MEMLANE_CONTEXT_PRIORITIES=recent,notes does
    context_priorities: list[str] | None = None
    # seed 001's rag block (memlane.seed_config maps it): recall into the context packet,
    # how many earlier messages, and the calibrated relevance floor (0-1) they must reach
    rag_enabled: bool = True
    rag_top_k: int = field(default=8, metadata=_bounds(ge=1, le=100))
    rag_min_score: float | None = field(default=None, metadata=_bounds(ge=0.0, le=1.0))
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
    admin_tenants: list[str] = field(default_factory=lambda: ["admin"])
    # Redis or Valkey (redis://, rediss:// or unix://, the `redis` extra): the event bus
    # between instances and their shared hot cache. The durable log stays in SQLite or
    # PostgreSQL (docs/scaling.md). redis_prefix names this deployment's keys and channel,
    # so two deployments can share one server.
    redis_url: str | None = None
    # How long change events stay in the outbox (store/events.py): an instance or SSE
    # client away longer than this is told events.lost and drops its caches.
    event_retention_days: float = field(default=7.0, metadata=_bounds(gt=0))
    redis_prefix: str = field(default="memlane", metadata={"pattern": r"^[A-Za-z0-9_.:-]{1,64}$"})

    def __post_init__(self) -> None:
        changed = {f.name: getattr(self, f.name) for f in fields(self) if not _as_given(f.name, getattr(self, f.name))}
        if changed:
            checked = _check(changed)
            for name in changed:
                object.__setattr__(self, name, getattr(checked, name))
        object.__setattr__(self, "_ready", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_ready"):
            if name not in _FIELD_NAMES:
                raise AttributeError(f"Settings has no setting {name!r}")
            if not _as_given(name, value):
                value = getattr(_check({name: value}), name)
        object.__setattr__(self, name, value)

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Settings:
        """A copy with ``update`` applied (checked like the constructor's values)."""
        update = dict(update or {})
        if set(update) - _FIELD_NAMES:
            _check(update)  # names the unknown settings
        return replace(self, **update)

    def storage_url(self) -> str:
        path = self.storage_path
        if "://" in path:
            return path
        return str(Path(path).expanduser())


_FIELD_NAMES = frozenset(f.name for f in fields(Settings))
_FIELDS: dict[str, Field[Any]] = {f.name: f for f in fields(Settings)}


def _field_default(spec: Field[Any]) -> Any:
    if spec.default is not MISSING:
        return spec.default
    assert callable(spec.default_factory)
    return spec.default_factory()


#: Each field's default (the factory's value for lists; compared with, never handed out).
_DEFAULTS: dict[str, Any] = {spec.name: _field_default(spec) for spec in fields(Settings)}


def _is_default(name: str, value: Any) -> bool:
    """Whether ``value`` is the field's default as it stands (same type: "2048" and
    2048.0 are not 2048, they are coerced)."""
    default = _DEFAULTS[name]
    return type(value) is type(default) and bool(value == default)


#: Settings that pydantic passes through a validator of ours (see _model).
_VALIDATED = frozenset({"allowed_hosts", "admin_tenants", "context_priorities", "redis_url"})


@cache
def _plain_choices() -> dict[str, tuple[frozenset[str], bool]]:
    """Per setting that takes a string as it is - a ``Literal`` of strings, or ``str`` /
    ``str | None`` with no bound, pattern or validator - its choices (empty: any string)
    and whether None is allowed."""
    import types
    import typing

    out: dict[str, tuple[frozenset[str], bool]] = {}
    for name, hint in typing.get_type_hints(Settings).items():
        spec = _FIELDS[name]
        if spec.metadata or name in _VALIDATED:
            continue
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        members = typing.get_args(hint) if union else (hint,)
        optional = type(None) in members
        rest = [m for m in members if m is not type(None)]
        if rest == [str]:
            out[name] = (frozenset(), optional)
        elif len(rest) == 1 and typing.get_origin(rest[0]) is Literal and all(
            isinstance(a, str) for a in typing.get_args(rest[0])
        ):
            out[name] = (frozenset(typing.get_args(rest[0])), optional)
    return out


def _as_given(name: str, value: Any) -> bool:
    """Whether checking ``value`` would return it unchanged: its field's default, or a
    string a string setting takes as it is (``durability="normal"``, ``embedder="minilm"``).
    Those skip pydantic, whose import and model (~50 ms) a process then never pays:
    every ``Memory(path, durability=...)`` in a short-lived process did before."""
    if _is_default(name, value):
        return True
    plain = _plain_choices().get(name)
    if plain is None:
        return False
    choices, optional = plain
    if value is None:
        return optional
    return type(value) is str and (not choices or value in choices)


def _split_list(value: Any) -> Any:
    if isinstance(value, str):
        value = [h.strip().lower() for h in value.split(",") if h.strip()]
    return value


def _split_priorities(value: Any) -> Any:
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


def _check_redis_url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(
            f"redis_url must start with redis://, rediss:// or unix:// (got {value.split('://')[0]!r}); "
            "e.g. redis://localhost:6379/0")
    return value


_MODEL_LOCK = threading.Lock()


@cache
def _model() -> type[BaseModel]:
    """The pydantic model that checks settings, made from the dataclass's fields once."""
    import typing

    from pydantic import ConfigDict, create_model, field_validator
    from pydantic import Field as Checked

    hints = typing.get_type_hints(Settings)
    spec: dict[str, Any] = {}
    for f in fields(Settings):
        spec[f.name] = (hints[f.name], Checked(default=_DEFAULTS[f.name], **f.metadata))
    validators: dict[str, Any] = {
        "split_lists": field_validator("allowed_hosts", "admin_tenants", mode="before")(_split_list),
        "split_priorities": field_validator("context_priorities", mode="before")(_split_priorities),
        "check_redis_url": field_validator("redis_url")(_check_redis_url),
    }
    model: type[BaseModel] = create_model(
        "Settings", __config__=ConfigDict(extra="forbid"), __validators__=validators, **spec
    )
    return model


def _check(values: dict[str, Any], source: str = "") -> BaseModel:
    """``values`` checked and coerced by the pydantic model; a bad one raises ConfigError
    (``source``: where they came from, named in it)."""
    from pydantic import ValidationError

    with _MODEL_LOCK:
        model = _model()
    try:
        return model(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        where = f" ({source})" if source else ""
        raise ConfigError(f"invalid memlane settings{where}: {problems}") from exc


_ENV_PREFIX = "MEMLANE_"


def _env_overrides(env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in env.items():
        if not key.startswith(_ENV_PREFIX):
            continue
        name = key[len(_ENV_PREFIX):].lower()
        if name in _FIELD_NAMES:
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
    if unknown := set(data) - _FIELD_NAMES:
        _check({name: data[name] for name in unknown}, str(path))  # names them
    to_check = {name: value for name, value in data.items() if not _as_given(name, value)}
    if to_check:
        checked = _check(to_check, str(path))
        data.update({name: getattr(checked, name) for name in to_check})
    return Settings(**data)
