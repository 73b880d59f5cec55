"""What the resolver finds and returns: candidates, references and the resolution."""

from __future__ import annotations

from dataclasses import dataclass, field

from memlane.models import JSON

AMBIGUITY_RATIO = 0.55


TURN_DECAY = 0.6


@dataclass(slots=True)
class Candidate:
    """Something in the recent conversation a reference may point to."""

    kind: str  # command | action | job | item | suggestion | message
    target: str  # what a reference to it stands for (a command, a job id, a sentence)
    message_id: int | None
    message_text: str
    role: str
    distance: int  # turns back from the newest (0 = the last turn)
    score: float = 0.0
    sentence: str = ""  # the sentence it appears in
    suggested: bool = False  # that sentence suggests or offers something
    in_list: bool = False  # one item of a numbered or bulleted list
    answer: str = ""  # a whole turn's answer ("message"), a tool call's result ("action")

    def label(self, language: str) -> str:
        """How the candidate reads as a numbered option."""
        if self.kind == "command":
            if language == "de":
                return f"Den Befehl `{self.target}` ausführen"
            return f"Run `{self.target}`"
        if self.kind == "action":
            if language == "de":
                return f"`{self.target}` erneut aufrufen"
            return f"Call `{self.target}` again"
        # An option is a choice, not a sentence: "Das System neu starten" (seed 004).
        return self.target.rstrip(".") or self.target

    def describe(self) -> str:
        if self.kind == "command":
            return f"the command `{self.target}`"
        if self.kind == "action":  # its result is what "is that enough?" asks about
            result = f" (result: {snip(self.answer, 120)})" if self.answer else ""
            return f"the action `{self.target}`{result}"
        if self.answer:  # a turn is its request and its answer: "they" after "which are down?"
            return f"{self.target} (answer: {snip(self.answer, 160)})"
        return self.target

    @property
    def offerable(self) -> bool:
        """Whether it may be offered as a clarification option: something the assistant
        suggested or did, or a thing with an id - never a user's own line."""
        return not (self.kind == "message" and self.role == "user")

    def to_dict(self) -> JSON:
        return {
            "kind": self.kind, "target": self.target, "message_id": self.message_id,
            "message_text": self.message_text, "role": self.role, "distance": self.distance,
            "score": round(self.score, 4), "sentence": self.sentence,
        }


@dataclass(slots=True)
class Reference:
    """One reference found in the query and what it was resolved to."""

    text: str  # as written in the query ("deinen Vorschlag")
    kind: str  # pronoun | reference | entity | selection | confirmation | negation
    start: int = 0
    end: int = 0
    target: str | None = None  # what it stands for; None when unresolved or ambiguous
    message_id: int | None = None  # the earlier message it points to
    message_text: str | None = None
    confidence: float = 0.0
    ambiguous: bool = False
    candidates: list[Candidate] = field(default_factory=list)
    description: str | None = None  # this reference's part of "[Context: ...]"

    def to_dict(self) -> JSON:
        return {
            "text": self.text, "kind": self.kind, "start": self.start, "end": self.end,
            "target": self.target, "message_id": self.message_id,
            "message_text": self.message_text, "confidence": round(self.confidence, 4),
            "ambiguous": self.ambiguous, "description": self.description,
            "candidates": [c.to_dict() for c in self.candidates],
        }


@dataclass(slots=True)
class Resolution:
    """The result of resolving a query against its session."""

    query: str
    resolved_query: str
    references: list[Reference] = field(default_factory=list)
    confidence: float = 1.0  # 1.0 when there was nothing to resolve
    language: str = "en"
    clarification: str | None = None  # a question to ask instead of guessing
    options: list[str] = field(default_factory=list)

    @property
    def needs_clarification(self) -> bool:
        return self.clarification is not None

    @property
    def context_used(self) -> bool:
        return self.resolved_query != self.query

    @property
    def references_resolved(self) -> list[str]:
        """The resolved phrases; a bare "ja"/"no" only when nothing more telling was found."""
        done = [r for r in self.references if r.target is not None]
        named = [r.text for r in done if r.kind not in ("confirmation", "negation")]
        return named or [r.text for r in done]

    def to_dict(self) -> JSON:
        return {
            "query": self.query, "resolved_query": self.resolved_query,
            "references": [r.to_dict() for r in self.references],
            "confidence": round(self.confidence, 4), "language": self.language,
            "clarification": self.clarification, "options": list(self.options),
        }

    def to_metadata(self) -> JSON:
        """Turn fields and metadata for ``store_interaction`` (seed 004's entry shape)."""
        out: JSON = {
            "resolved_query": self.resolved_query,
            "context_used": self.context_used,
            "references_resolved": self.references_resolved,
            "resolution_confidence": round(self.confidence, 4),
        }
        if self.clarification is not None:
            out["clarification"] = self.clarification
        return out


def snip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
