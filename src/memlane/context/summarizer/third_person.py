"""The third-person rewrite: "I went to a support group" from Caroline becomes "Caroline
went to a support group" (pronouns, possessives and the verb's agreement, English only)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memlane.patterns import lazy_compile

_ADVERBS = (
    r"really|just|also|always|still|never|actually|totally|definitely|usually|often|"
    r"sometimes|absolutely|truly|even|only|already|kinda|honestly|personally|now|"
    r"finally|recently|currently|especially|sure|do|so|too"
)


_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "be": "is", "am": "is", "are": "is"}


# Present-tense verbs that follow "I" in chat often enough to be worth
# conjugating; anything else (past forms, modals, unknown words) is left alone.
_VERBS = frozenset(
    """
    love like think feel want need know hope have do go enjoy find believe guess mean agree
    wish try plan miss remember see get work play keep make take appreciate understand admire
    adore prefer hate use run teach learn live stay spend read write watch cook bake paint draw
    sing dance swim volunteer care support imagine bet plan look recommend visit travel feel
    bring call collect dream practice study listen hang help tend carry own value realize
    struggle worry relax train believe cherish mentor hike walk skate surf create build love
    bring start stop continue forget say tell ask give put leave pick send buy sell move grow
    wonder suppose hear meet lose win fix check share paint manage handle finish join follow
    """.split()
)


def _third_person(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if re.search(r"(?:s|sh|ch|x|z|o)$", lower):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    return verb + "s"


# One alternation per person, tried left to right at each position, so the
# longer forms ("I'm", "you're") win over the bare pronoun. Each group names the
# replacement; "{n}" is the person's name, "{p}" the possessive, "conj" means
# "name, the adverbs, then the verb in the third person".
_ADV = rf"(?:\s+(?:{_ADVERBS}))*"


_SPEAKER_FORMS: tuple[tuple[str, str], ...] = (
    (r"\bI'm\b|\bIm\b|\bI am\b", "{n} is"),
    (r"\bI've\b|\bI have\b", "{n} has"),
    (r"\bI'd\b", "{n} would"),
    (r"\bI'll\b", "{n} will"),
    (r"\bI don't\b|\bI do not\b", "{n} doesn't"),
    (rf"\bI{_ADV}\s+[a-zA-Z]+\b", "conj"),
    (r"\bI\b", "{n}"),
    (r"(?i:\bmyself\b)", "themself"),
    (r"(?i:\bmy\b|\bmine\b)", "{p}"),
    (r"(?i:\bme\b)", "{o}"),
)


_GROUP_FORMS: tuple[tuple[str, str], ...] = (
    (r"(?i:\bwe're\b|\bwe are\b)", "they are"),
    (r"(?i:\bwe've\b)", "they have"),
    (r"(?i:\bwe'll\b)", "they will"),
    (r"(?i:\bwe'd\b)", "they would"),
    (r"(?i:\bwe\b)", "they"),
    (r"(?i:\bourselves\b)", "themselves"),
    (r"(?i:\bours\b)", "theirs"),
    (r"(?i:\bour\b)", "their"),
    (r"(?i:\bus\b)", "them"),
)


_ADDRESSEE_FORMS: tuple[tuple[str, str], ...] = (
    (r"(?i:\byou guys\b|\by'all\b)", "they"),
    (r"(?i:\byou're\b|\byou are\b)", "{n} is"),
    (r"(?i:\byou were\b)", "{n} was"),
    (r"(?i:\byou've\b|\byou have\b)", "{n} has"),
    (r"(?i:\byou'll\b)", "{n} will"),
    (r"(?i:\byou'd\b)", "{n} would"),
    (r"(?i:\byou don't\b)", "{n} doesn't"),
    (r"(?i:\byourself\b)", "themself"),
    (r"(?i:\byours\b|\byour\b)", "{p}"),
    (rf"(?i:\byou{_ADV}\s+[a-zA-Z]+\b)", "conj"),
    (r"(?i:\byou\b)", "{n}"),
)


def _compile(groups: Sequence[tuple[str, tuple[tuple[str, str], ...]]]) -> tuple[
    re.Pattern[str], dict[str, tuple[str, str]]
]:
    parts: list[str] = []
    table: dict[str, tuple[str, str]] = {}
    for who, forms in groups:
        for i, (pattern, template) in enumerate(forms):
            name = f"{who}{i}"
            parts.append(f"(?P<{name}>{pattern})")
            table[name] = (who, template)
    return re.compile("|".join(parts)), table


_PRONOUN_RE, _PRONOUN_TABLE = _compile(
    (("s", _SPEAKER_FORMS), ("g", _GROUP_FORMS), ("a", _ADDRESSEE_FORMS))
)


_PRONOUN_RE_NO_ADDRESSEE, _ = _compile((("s", _SPEAKER_FORMS), ("g", _GROUP_FORMS)))


_PRONOUN_START_RE = lazy_compile(r"(?i)\b(?=i\b|i'|im\b|m[ey]\b|mine\b|myself\b|we\b|we'|our|us\b|y(?:ou|'all))")


_CONJ_RE = lazy_compile(rf"^(\w+)((?i:{_ADV}))\s+([a-zA-Z]+)$")


def _conjugated(text: str, name: str) -> str:
    m = _CONJ_RE.match(text)
    if m is None:  # pragma: no cover - the outer pattern guarantees the shape
        return text
    adverbs = m.group(2).split()
    verb = m.group(3)
    if adverbs and adverbs[0].lower() == "do":
        # "I do love it" -> "Caroline does love it": the auxiliary takes the -s.
        adverbs[0] = "does"
    elif verb.lower() in _VERBS:
        verb = _third_person(verb)
    middle = (" " + " ".join(adverbs)) if adverbs else ""
    return f"{name}{middle} {verb}"


def rewrite(sentence: str, speaker: str, addressee: str | None) -> str:
    """``sentence`` said by ``speaker`` to ``addressee``, told in the third person.

    Deliberately simple and gender-neutral: "I" becomes the speaker's name,
    "my" becomes "<Name>'s", "you" the addressee's name, "we" becomes "they".
    """

    pattern = _PRONOUN_RE if addressee else _PRONOUN_RE_NO_ADDRESSEE
    out: list[str] = []
    done = 0
    last = ""  # the person named most recently
    # Scanning only where a pronoun starts is much faster than letting the big
    # alternation try every character position.
    for hit in _PRONOUN_START_RE.finditer(sentence):
        if hit.start() < done:
            continue
        m = pattern.match(sentence, hit.start())
        if m is None:
            continue
        who, template = _PRONOUN_TABLE[m.lastgroup or ""]
        name = speaker if who == "s" else (addressee or "")
        # The name once, then "their"/"them": "Caroline loves their dog", not
        # "Caroline loves Caroline's dog". Subjects keep the name so verbs agree.
        again = last == name
        if who != "g":
            last = name
        if template == "conj":
            text = _conjugated(m.group(0), name)
        else:
            text = template.format(
                n=name, p="their" if again else f"{name}'s", o="them" if again else name
            )
        if m.start() > 0 and name.startswith("The "):
            # A role, not a name: "Remind the user to...", not "Remind The user to...".
            text = text.replace(name, "the" + name[3:], 1)
        out.append(sentence[done : m.start()])
        out.append(text)
        done = m.end()
    out.append(sentence[done:])
    s = "".join(out).strip()
    return s[:1].upper() + s[1:] if s else s
