""":class:`RuleExtractor`: candidate notes from user messages by the EN/DE patterns, no model."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from memlane.context.keyphrases import STOPWORDS, normalize_term
from memlane.models import Message
from memlane.notes.extract.facets import entities
from memlane.notes.extract.protocol import ExtractionContext
from memlane.notes.extract.rule_patterns import (
    ATTR_STOP,
    DE_ALLERGY,
    DE_ATTR,
    DE_COMMIT,
    DE_DECISION,
    DE_FAV,
    DE_FROM,
    DE_HOME,
    DE_NAME,
    DE_NEG,
    DE_POS,
    DE_WORK,
    EN_ALLERGY,
    EN_ATTR,
    EN_COMMIT,
    EN_DECISION,
    EN_FAV,
    EN_FROM,
    EN_HOME,
    EN_IS_A,
    EN_NAME,
    EN_NEG,
    EN_NOT_FAN,
    EN_POS,
    EN_REMIND,
    EN_SWITCH,
    EN_VERB_TEXT,
    EN_WORK,
    SELF_IS_STOP,
)
from memlane.notes.extract.slots import (
    CLAUSES,
    HEDGES,
    MY,
    clean_value,
    find_urls,
    head_words,
    is_pronoun,
    lang_of,
    norm_text,
    slot_key,
    split_sentences,
)
from memlane.notes.models import NoteCandidate


class RuleExtractor:
    """Deterministic English/German candidate notes; same input, same output."""

    def extract(self, messages: Sequence[Message], ctx: ExtractionContext) -> list[NoteCandidate]:
        out: list[NoteCandidate] = []
        for msg in messages:
            if msg.id is None or msg.role != "user" or not msg.content.strip():
                continue
            if ctx.is_command is not None and ctx.is_command(msg.content):
                continue
            out.extend(self._from_message(msg, ctx))
        return out

    # ------------------------------------------------------------ per message

    def _from_message(self, msg: Message, ctx: ExtractionContext) -> list[NoteCandidate]:
        uid, name = ctx.speaker(msg)
        is_anchor = uid == ctx.anchor_id
        boost = 0.1 if is_anchor else 0.0
        boost += 0.2 * max(msg.importance, 1.0 if msg.pinned else 0.0)
        found: list[NoteCandidate] = []

        def add(text: str, kind: str, slot: str | None, value: str, *, polarity: int = 1,
                base: float, sentence: str, negates: Sequence[str] = (), lang: str = "en",
                comparative: bool = False) -> None:
            score = base + boost
            if sentence.rstrip().endswith("?"):
                score -= 0.4  # a question states nothing
            if HEDGES.search(sentence):
                score -= 0.25
            if len(value) < 2 or is_pronoun(value):
                score -= 0.5  # "I like it": the object needs the context we do not have here
            if lang == "en":
                text = MY.sub("their", text)  # "enjoys hiking with my dog" -> "their dog"
            found.append(
                NoteCandidate(
                    text=text, kind=kind, user_id=uid, source_ids=[msg.id or 0],
                    session_id=ctx.session_id, author_id=msg.author_id, author_name=name,
                    slot=slot, value=value, polarity=polarity, importance=round(min(score, 1.0), 3),
                    entities=entities(sentence), negates=list(negates), valid_from=msg.created_at,
                    metadata={"lang": lang, "sentence": sentence[:300],
                              # "prefer X (over Y)": a ranking, so it overturns "Y over X"
                              **({"comparative": True} if comparative else {})},
                )
            )

        whole = lang_of(msg.content)  # what a short sentence of it ("Ja.", "Tee!") is in
        for sentence in split_sentences(msg.content):
            lang = lang_of(sentence, whole)
            # "I don't like coffee anymore, I prefer tea now": two statements, one sentence.
            for clause in CLAUSES.split(sentence):
                if clause.strip():
                    (self._german if lang == "de" else self._english)(clause.strip(), name, add)
        for url in find_urls(msg.content):
            add(f"{name} shared a link: {url}", "link", f"link:{url.lower()}", url, base=0.55,
                sentence=url, lang="en")
        return _dedupe(found)

    # ------------------------------------------------------------ English

    @staticmethod
    def _english(s: str, name: str, add: Callable[..., None]) -> None:
        poss = f"{name}'" if name.endswith("s") else f"{name}'s"
        fired = False
        m = EN_SWITCH.search(s)
        if m:
            old, obj = clean_value(m["old"]), clean_value(m["obj"])
            add(f"{name} switched from {old} to {obj}.", "preference", slot_key("pref", obj), obj,
                base=0.65, sentence=s, negates=[slot_key("pref", old)], comparative=True)
            fired = True
        m = EN_NEG.search(s)
        if m and not fired:
            verb = (m["verb"] or m["verb2"] or "").lower()
            obj = clean_value(m["obj"])
            phrase = "hates" if verb == "hate" else "does not like"
            add(f"{name} {phrase} {obj}.", "preference", slot_key("pref", obj), obj, polarity=-1,
                base=0.6, sentence=s)
            fired = True
        m = EN_NOT_FAN.search(s)
        if m and not fired:
            obj = clean_value(m["obj"])
            neg = bool(m["neg"])
            add(f"{name} {'is not' if neg else 'is'} into {obj}.", "preference", slot_key("pref", obj),
                obj, polarity=-1 if neg else 1, base=0.55, sentence=s)
            fired = True
        m = EN_POS.search(s)
        if m and not fired and not re.search(r"\b(?:would|'d)\s+(?:like|love|prefer)\b", s, re.IGNORECASE):
            verb = m["verb"].lower()
            raw = m["obj"]
            obj = clean_value(raw)
            other = re.search(r"\b(?:over|to|rather than|instead of|more than)\s+(?P<o>[^.!?,]+)", raw, re.IGNORECASE)
            # "coffee now, not tea" / "coffee instead of tea": the other object is turned down.
            refused = re.search(r"(?:,\s*|\s)(?:and\s+|but\s+)?(?:not|instead of|rather than)\s+(?P<o>[^.!?,]+)",
                                raw, re.IGNORECASE)
            if verb == "prefer" and other:
                obj = clean_value(raw[: other.start()])
                old = clean_value(other["o"])
                add(f"{name} prefers {obj} over {old}.", "preference", slot_key("pref", obj), obj,
                    base=0.65, sentence=s, negates=[slot_key("pref", old)], comparative=True)
            elif refused and not is_pronoun(refused["o"]):
                obj = clean_value(raw[: refused.start()])
                old = clean_value(refused["o"])
                add(f"{name} {EN_VERB_TEXT[verb]} {obj}, not {old}.", "preference", slot_key("pref", obj), obj,
                    base=0.65, sentence=s, negates=[slot_key("pref", old)], comparative=verb == "prefer")
            elif re.match(r"(?:to|doing|going|being|when|that|it when)\b", obj, re.IGNORECASE) and verb != "prefer":
                add(f"{name} {EN_VERB_TEXT[verb]} {obj}.", "preference", slot_key("pref", obj), obj,
                    base=0.55, sentence=s)
            else:
                add(f"{name} {EN_VERB_TEXT[verb]} {obj}.", "preference", slot_key("pref", obj), obj,
                    base=0.6, sentence=s, comparative=verb == "prefer")
        m = EN_FAV.search(s)
        if m:
            cat, val = " ".join(m["cat"].lower().split()), clean_value(m["val"])
            add(f"{poss} favourite {cat} is {val}.", "preference", f"fav:{head_words(cat)}", val,
                base=0.65, sentence=s)
        else:
            m = EN_ATTR.search(s)
            if m:
                attr = " ".join(m["attr"].lower().split())
                val = clean_value(m["val"])
                if attr.split()[0] not in ATTR_STOP and attr not in STOPWORDS and len(attr.split()) <= 3:
                    base = 0.7 if attr in ("name", "email", "birthday", "phone number", "address") else 0.6
                    add(f"{poss} {attr} is {val}.", "fact", f"attr:{head_words(attr)}", val, base=base, sentence=s)
        m = EN_NAME.search(s)
        if m:
            val = clean_value(m["val"])
            add(f"{poss} name is {val}.", "fact", "attr:name", val, base=0.7, sentence=s)
        m = EN_WORK.search(s)
        if m:
            val = clean_value(m["val"])
            add(f"{name} works at {val}.", "fact", "work", val, base=0.7, sentence=s)
        m = EN_HOME.search(s)
        if m:
            val = clean_value(m["val"])
            moved = m["verb"].lower() in ("moved", "relocated", "settled")
            text = f"{name} moved to {val}." if moved else f"{name} lives in {val}."
            add(text, "fact", "home", val, base=0.7, sentence=s)
        m = EN_FROM.search(s)
        if m:
            val = clean_value(m["val"])
            add(f"{name} is from {val}.", "fact", "origin", val, base=0.65, sentence=s)
        m = EN_ALLERGY.search(s)
        if m:
            val = clean_value(m["val"])
            add(f"{name} is allergic to {val}.", "fact", slot_key("allergy", val), val, base=0.8, sentence=s)
        elif (m := EN_IS_A.search(s)) and not re.search(r"\bI(?:'m| am)\s+(?:a|an)\s+fan\b", s, re.IGNORECASE):
            val = clean_value(m["val"])
            first = val.split()[0].lower() if val.split() else ""
            if first and first not in SELF_IS_STOP and len(val.split()) <= 5:
                add(f"{name} is a{'n' if val[:1].lower() in 'aeiou' else ''} {val}.", "fact",
                    f"is:{norm_text(val)}", val, base=0.55, sentence=s)
        m = EN_DECISION.search(s)
        if m:
            val = clean_value(m["val"] or m["val2"] or m["val3"] or "", cut_clauses=False)
            add(f"Decision ({name}): {val}.", "decision", f"decision:{norm_text(val)}", val,
                base=0.7, sentence=s)
        m = EN_COMMIT.search(s) or EN_REMIND.search(s)
        if m:
            val = clean_value(m["val"], cut_clauses=False)
            if len(val.split()) >= 2:
                add(f"{name} will {val}.", "commitment", f"commit:{norm_text(val)}", val,
                    base=0.6, sentence=s)

    # ------------------------------------------------------------ German

    @staticmethod
    def _german(s: str, name: str, add: Callable[..., None]) -> None:
        poss = f"{name}'" if name.endswith(("s", "ß", "x", "z")) else f"{name}s"
        m = DE_NEG.search(s)
        if m:
            obj = clean_value(m["obj1"] or m["obj2"] or m["obj3"] or "")
            phrase = f"{name} hasst {obj}." if m["hate"] else f"{name} mag {obj} nicht."
            add(phrase, "preference", slot_key("pref", obj, "de"), obj, polarity=-1, base=0.6, sentence=s, lang="de")
        else:
            m = DE_POS.search(s)
            if m and not re.search(r"\b(?:möchte|würde)\b", s, re.IGNORECASE):
                raw = m["obj"]
                other = re.search(r"\b(?:als|statt|anstatt|nicht)\s+(?P<o>[^.!?,]+)", raw, re.IGNORECASE)
                obj = clean_value(raw[: other.start()] if other else raw)
                negates = [slot_key("pref", clean_value(other["o"]), "de")] if other else []
                verb = m["verb"].lower()
                if verb.startswith(("trinke", "esse", "höre", "lese", "spiele", "sehe")) or verb == "bevorzuge" or other:
                    text = f"{name} mag {obj} lieber." if "lieber" in verb or other or verb == "bevorzuge" else f"{name} mag {obj}."
                else:
                    text = f"{name} {'liebt' if verb == 'liebe' else 'mag'} {obj}."
                add(text, "preference", slot_key("pref", obj, "de"), obj, base=0.6, sentence=s,
                    negates=negates, lang="de",
                    comparative="lieber" in verb or "liebsten" in verb or verb == "bevorzuge" or bool(other))
        m = DE_FAV.search(s)
        if m:
            cat, val = m["cat"].lower(), clean_value(m["val"])
            add(f"{poss} Lieblings{cat} ist {val}.", "preference", f"fav:{normalize_term(cat, 'de')}", val,
                base=0.65, sentence=s, lang="de")
        else:
            m = DE_ATTR.search(s)
            if m and m["attr"].lower() not in ATTR_STOP and not m["attr"].lower().startswith("lieblings"):
                attr, val = m["attr"], clean_value(m["val"])
                add(f"{poss} {attr} ist {val}.", "fact", f"attr:{normalize_term(attr, 'de')}", val,
                    base=0.6, sentence=s, lang="de")
        m = DE_NAME.search(s)
        if m:
            val = clean_value(m["val"])
            add(f"{name} heißt {val}.", "fact", "attr:name", val, base=0.7, sentence=s, lang="de")
        m = DE_WORK.search(s)
        if m:
            val = clean_value(m["val"])
            add(f"{name} arbeitet bei {val}.", "fact", "work", val, base=0.7, sentence=s, lang="de")
        m = DE_HOME.search(s)
        if m:
            val = clean_value(m["val1"] or m["val2"] or m["val3"] or m["val4"] or "")
            add(f"{name} wohnt in {val}.", "fact", "home", val, base=0.7, sentence=s, lang="de")
        m = DE_FROM.search(s)
        if m:
            val = clean_value(m["val"])
            add(f"{name} kommt aus {val}.", "fact", "origin", val, base=0.65, sentence=s, lang="de")
        m = DE_ALLERGY.search(s)
        if m:
            val = clean_value(m["val"])
            add(f"{name} ist allergisch gegen {val}.", "fact", slot_key("allergy", val, "de"), val,
                base=0.8, sentence=s, lang="de")
        m = DE_DECISION.search(s)
        if m:
            val = clean_value(m["val"], cut_clauses=False)
            add(f"Beschluss ({name}): {val}.", "decision", f"decision:{norm_text(val, 'de')}", val,
                base=0.7, sentence=s, lang="de")
        m = DE_COMMIT.search(s)
        if m:
            val = clean_value(m["val"], cut_clauses=False)
            if len(val.split()) >= 2:
                add(f"{name} wird {val}.", "commitment", f"commit:{norm_text(val, 'de')}", val,
                    base=0.6, sentence=s, lang="de")


def _dedupe(cands: list[NoteCandidate]) -> list[NoteCandidate]:
    """One candidate per slot and message: the last statement in a message wins."""
    by_slot: dict[tuple[str | None, str | None], NoteCandidate] = {}
    for c in cands:
        by_slot[(c.user_id, c.slot or c.text)] = c
    return list(by_slot.values())
