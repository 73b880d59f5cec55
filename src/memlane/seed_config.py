"""The seed projects' config blocks, mapped onto memlane's settings.

Seed 001 (harombe) configures semantic search and RAG in two nested blocks::

    memory:
      vector_store: {enabled, backend, embedding_model, embedding_provider,
                     persist_directory, collection_name}
      rag: {enabled, top_k, min_similarity}

Every key is either mapped to the memlane setting that does the same job or, when
memlane has nothing to configure there (it keeps vectors inside its own database),
accepted with a warning that names the key and says what memlane does instead. A key
inside these blocks that no seed uses is an error, like an unknown top-level key.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from memlane.errors import ConfigError

log = logging.getLogger("memlane.config")

__all__ = ["map_seed_blocks"]

#: The model all-MiniLM-L6-v2 that memlane ships (int8, from a pip package) as "minilm".
_MINILM_NAMES = frozenset({
    "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "all-minilm", "minilm",
})

_VECTOR_KEYS = frozenset({
    "enabled", "backend", "embedding_model", "embedding_provider", "persist_directory",
    "collection_name",
})
_RAG_KEYS = frozenset({"enabled", "top_k", "min_similarity"})

# What memlane does instead, for keys it accepts but does not need.
_IGNORED = {
    "backend": "memlane keeps vectors in its own database (SQLite or PostgreSQL), not in {value!r}",
    "persist_directory": "vectors are stored inside the memory database (storage_path), "
                         "not in a separate directory",
    "collection_name": "vectors live in the memory database's own table; there are no collections",
}


def _block(section: Mapping[str, Any], name: str, allowed: frozenset[str]) -> dict[str, Any]:
    raw = section.get(name)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"'{name}' must be a mapping of settings, got {type(raw).__name__}")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(
            f"unknown key(s) in '{name}': {', '.join(unknown)}; known: {', '.join(sorted(allowed))}"
        )
    return dict(raw)


def _embedder_spec(model: str | None, provider: str | None) -> str | None:
    """memlane's embedder setting for the seed's model and provider (None: keep the default)."""
    prov = (provider or "sentence-transformers").strip().lower()
    if model is None:
        return None if prov in ("sentence-transformers", "st", "local") else f"{prov}:"
    name = model.strip()
    if prov in ("sentence-transformers", "st", "local"):
        if name.lower() in _MINILM_NAMES:
            return "minilm"
        return f"st:{name}"
    if prov == "ollama":
        return f"ollama:{name}"
    if prov == "openai":
        return f"openai:{name}"
    raise ConfigError(
        f"vector_store.embedding_provider {provider!r} is not supported; use "
        "sentence-transformers, ollama or openai"
    )


def map_seed_blocks(section: dict[str, Any]) -> dict[str, Any]:
    """``section`` with seed 001's ``vector_store`` and ``rag`` blocks replaced by settings."""
    if "vector_store" not in section and "rag" not in section:
        return section
    out = {k: v for k, v in section.items() if k not in ("vector_store", "rag")}
    vec = _block(section, "vector_store", _VECTOR_KEYS)
    rag = _block(section, "rag", _RAG_KEYS)
    for key, why in _IGNORED.items():
        if key in vec:
            log.warning("config key vector_store.%s is accepted but not used: %s",
                        key, why.format(value=vec[key]))
    if vec.get("enabled") is False:
        out.setdefault("embedder", "none")
    else:
        spec = _embedder_spec(vec.get("embedding_model"), vec.get("embedding_provider"))
        if spec is not None and spec.endswith(":"):
            raise ConfigError(
                f"vector_store.embedding_provider {vec.get('embedding_provider')!r} needs "
                "vector_store.embedding_model (the model name)"
            )
        if spec is not None:
            out.setdefault("embedder", spec)
    if "enabled" in rag:
        out.setdefault("rag_enabled", rag["enabled"])
    if "top_k" in rag:
        out.setdefault("rag_top_k", rag["top_k"])
    if "min_similarity" in rag:
        out.setdefault("rag_min_score", rag["min_similarity"])
    return out
