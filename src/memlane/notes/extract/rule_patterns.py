"""The English and German statement patterns the rules match: preferences, favourites,
attributes, names, work, home, origin, allergies, decisions and commitments."""

from __future__ import annotations

import re

from memlane.patterns import lazy_compile

# Each rule: compiled pattern, handler name. Patterns run on one sentence; the first
# match of each rule wins; several rules may fire on one sentence.
_I = r"(?:^|(?<=[\s,;:(]))"


# A value runs to the end of the sentence; a dot inside a word (an e-mail, a domain,
# "v1.2") does not end it.
_V = r"(?:[^.!?]|[.!?](?=\w))+"


EN_POS = lazy_compile(
    _I + r"I(?:'m| am)?\s+(?:really\s+|truly\s+|absolutely\s+|also\s+|still\s+|now\s+|actually\s+)?"
    r"(?P<verb>love|like|enjoy|adore|prefer)s?\s+(?P<obj>" + _V + r")",
    re.IGNORECASE,
)


EN_NEG = lazy_compile(
    _I + r"I\s+(?:(?:really\s+|absolutely\s+|just\s+|actually\s+)?(?P<verb>hate|dislike|detest|can't stand|cannot stand)"
    r"|(?:don't|do not|no longer|didn't ever|never)\s+(?:really\s+)?(?P<verb2>like|love|enjoy|prefer))\s+"
    r"(?P<obj>" + _V + r")",
    re.IGNORECASE,
)


EN_NOT_FAN = lazy_compile(
    _I + r"I(?:'m| am)\s+(?P<neg>not\s+|no longer\s+)?(?:a\s+(?:big\s+|huge\s+)?fan of|into)\s+(?P<obj>" + _V + r")",
    re.IGNORECASE,
)


EN_SWITCH = lazy_compile(
    _I + r"I(?:'ve| have)?\s+(?:switched|changed|moved on)\s+from\s+(?P<old>" + _V + r"?)\s+to\s+(?P<obj>" + _V + r")",
    re.IGNORECASE,
)


EN_FAV = lazy_compile(
    r"\bmy\s+(?:new\s+|current\s+|all-time\s+)?favou?rite\s+(?P<cat>[\w\s-]{1,30}?)\s+(?:is|are)\s+(?:now\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)


EN_ATTR = lazy_compile(
    r"\bmy\s+(?:new\s+)?(?P<attr>[a-z][\w\s-]{0,30}?)\s+(?:is|are)\s+(?:now\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)


EN_NAME = lazy_compile(r"\b(?:call me|my name's)\s+(?P<val>[^.!?,]+)", re.IGNORECASE)


EN_WORK = lazy_compile(
    _I + r"I(?:'m| am)?\s+(?:now\s+|currently\s+|still\s+)?(?:work(?:ing)?|started working|got a job|took a job)\s+"
    r"(?:at|for|with)\s+(?P<val>" + _V + r")",
    re.IGNORECASE,
)


EN_HOME = lazy_compile(
    _I + r"I(?:'ve| have|'m| am)?\s+(?:just\s+|recently\s+|finally\s+|now\s+)?"
    r"(?P<verb>moved|relocated|live|living|settled)\s+(?:to|in)\s+(?P<val>" + _V + r")",
    re.IGNORECASE,
)


EN_FROM = lazy_compile(_I + r"I(?:'m| am)\s+(?:originally\s+)?from\s+(?P<val>" + _V + r")", re.IGNORECASE)


EN_ALLERGY = lazy_compile(_I + r"I(?:'m| am)\s+allergic to\s+(?P<val>" + _V + r")", re.IGNORECASE)


EN_IS_A = lazy_compile(
    _I + r"I(?:'m| am)\s+(?:a|an)\s+(?P<val>" + _V + r")", re.IGNORECASE,
)


EN_DECISION = lazy_compile(
    r"\b(?:we|I)\s+(?:have\s+|'ve\s+)?(?:decided|agreed|settled)\s+(?:to|on|that)?\s*(?P<val>" + _V + r")"
    r"|\blet's go with\s+(?P<val2>" + _V + r")|\bdecision:\s*(?P<val3>" + _V + r")",
    re.IGNORECASE,
)


EN_COMMIT = lazy_compile(
    _I + r"I(?:'ll| will| promise to| am going to|'m going to)\s+(?!be\b|see\b|think\b|try\b|let\b|have a look\b)"
    r"(?P<val>" + _V + r")",
    re.IGNORECASE,
)


EN_REMIND = lazy_compile(r"\bremind me to\s+(?P<val>" + _V + r")", re.IGNORECASE)


DE_POS = lazy_compile(
    r"\bich\s+(?P<verb>mag|liebe|bevorzuge|(?:trinke|esse|höre|lese|spiele|sehe)\s+"
    r"(?:jetzt\s+|nun\s+|inzwischen\s+|mittlerweile\s+|auch\s+|eigentlich\s+)?(?:sehr\s+)?"
    r"(?:gern|gerne|lieber|am liebsten))\s+"
    r"(?P<obj>" + _V + r")",
    re.IGNORECASE,
)


DE_NEG = lazy_compile(
    r"\bich\s+(?:(?P<hate>hasse|verabscheue)\s+(?P<obj1>" + _V + r")"
    r"|(?:mag|trinke|esse)\s+(?:kein|keine|keinen)\s+(?P<obj2>" + _V + r")"
    # obj3 stops at a comma: "ich mag Kaffee, nicht Tee" turns down the tea, not the coffee
    r"|mag\s+(?P<obj3>[^.!?,]+?)\s+(?:nicht|nicht mehr|gar nicht)(?:\s|$|[.!?,]))",
    re.IGNORECASE,
)


DE_FAV = lazy_compile(
    r"\bmein(?:e|en)?\s+(?:neues?\s+|neuer\s+)?lieblings(?P<cat>\w+)\s+(?:ist|sind)\s+(?:jetzt\s+|nun\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)


DE_ATTR = lazy_compile(
    r"\bmein(?:e)?\s+(?:neue[rs]?\s+)?(?P<attr>\w+)\s+(?:ist|sind|lautet)\s+(?:jetzt\s+|nun\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)


DE_NAME = lazy_compile(r"\bich\s+heiße\s+(?P<val>[^.!?,]+)", re.IGNORECASE)


DE_WORK = lazy_compile(
    r"\bich\s+arbeite\s+(?:jetzt\s+|seit\s+\w+\s+|inzwischen\s+)?(?:bei|für)\s+(?P<val>" + _V + r")",
    re.IGNORECASE,
)


DE_HOME = lazy_compile(
    r"\bich\s+(?:(?:wohne|lebe)\s+(?:jetzt\s+|inzwischen\s+|seit\s+\w+\s+)?in\s+(?P<val1>" + _V + r")"
    r"|bin\s+(?:nach\s+(?P<val2>" + _V + r"?)\s+gezogen|umgezogen\s+nach\s+(?P<val3>" + _V + r"))"
    r"|ziehe\s+nach\s+(?P<val4>" + _V + r"))",
    re.IGNORECASE,
)


DE_FROM = lazy_compile(r"\bich\s+komme\s+(?:ursprünglich\s+)?aus\s+(?P<val>" + _V + r")", re.IGNORECASE)


DE_ALLERGY = lazy_compile(r"\bich\s+bin\s+allergisch\s+gegen\s+(?P<val>" + _V + r")", re.IGNORECASE)


DE_DECISION = lazy_compile(
    r"\bwir\s+haben\s+(?:uns\s+)?(?:beschlossen|entschieden|vereinbart|geeinigt)\s*,?\s*(?:dass\s+|für\s+|auf\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)


DE_COMMIT = lazy_compile(
    r"\bich\s+(?:werde|kümmere mich um|verspreche,?)\s+(?P<val>" + _V + r")", re.IGNORECASE,
)


# "my X is Y" is too broad without a stop list: "my point is", "my bad".
ATTR_STOP = frozenset(
    "point question answer idea guess bad god goodness pleasure problem concern issue worry "
    "hope fear advice suggestion plan opinion view feeling sense impression understanding "
    "favorite favourite thought thoughts turn fault day week life head mind heart "
    "frage antwort idee meinung vorschlag problem plan gefühl eindruck lieblings".split()
)


SELF_IS_STOP = frozenset("bit little lot big huge fan good sure".split())


EN_VERB_TEXT = {"love": "loves", "like": "likes", "enjoy": "enjoys", "adore": "adores", "prefer": "prefers"}
