"""Reference resolution (seed 004), English and German.

A user's message often points back into the conversation: "ja setze deinen
Vorschlag um", "run that again", "no, that's wrong", "the second one". The
resolver finds those references, decides what each points to in the recent
history, and returns the query with a ``[Context: ...]`` suffix an LLM can use
(the seed's example: ``ja setze deinen vorschlag um! [Context: Previous
suggestion was ...]``). When a reference could mean several recent things it
does not guess: it returns a numbered clarification in the query's language,
built from those things (seed 004: "Ich bin mir nicht sicher, worauf sich 'das'
bezieht. Meinten Sie: 1. ... 2. ... 3. Etwas anderes?").

Referents are commands (code spans, shell lines), tool calls, job ids, list
items and the assistant's suggestions or offers (German infinitive steps such as
"Das System neu starten." included); a turn with none of those is a referent
itself (named by the user's request). Salience falls by ``TURN_DECAY`` per turn
back, and words the query shares with a referent raise it. A bare reference
("mach das nochmal", "do it again") whose runner-up referent reaches
``AMBIGUITY_RATIO`` of the best one is ambiguous. Clarification options are
only what the assistant suggested or did: the user is never offered their own
line back. A confirmation next to a named reference ("ja, setze deinen
Vorschlag um") confirms what that reference names and shares its ambiguity.

Deterministic, offline, regular expressions only. The modules, in the order a query meets
them: ``cues`` (with ``cue_patterns``, ``pronouns``, ``impersonal`` and the EN/DE
``lexicon``) finds the references; ``candidates`` collects what the history offers;
``bind_named`` and ``bind_pronouns`` (with ``binding`` and ``matching``) bind each
reference; ``clarification`` asks when a reference could mean several things; ``resolver``
ties them together.
"""

from memlane.state.references.cues import detect_references, has_reference_cues
from memlane.state.references.records import AMBIGUITY_RATIO, Candidate, Reference, Resolution
from memlane.state.references.resolver import resolve, resolve_in_session

__all__ = [
    "AMBIGUITY_RATIO",
    "Candidate",
    "Reference",
    "Resolution",
    "detect_references",
    "has_reference_cues",
    "resolve",
    "resolve_in_session",
]
