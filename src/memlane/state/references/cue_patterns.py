"""The patterns of the words that point back: replies ("ja", "no, that's wrong"), named
references ("deinen Vorschlag", "what you said"), selections ("the second one"),
demonstratives, places and times, and fragments that repeat the last request."""

from __future__ import annotations

import re

from memlane.patterns import lazy_compile
from memlane.state.references.lexicon import FLAGS, NOUNS_DE, NOUNS_EN, ORDINALS, ORDINALS_DE, RESULT_NOUNS

CONFIRM_START = lazy_compile(
    r"^\W*(?:(?:ok(?:ay)?|yes|sure|ja)\W+do\s+it(?!\s+again)|go\s+ahead|please\s+do|"
    r"let'?s\s+do\s+it|sounds\s+good|do\s+it(?=\W*$)|"
    r"yes|yeah|yep|yup|sure|ok(?:ay)?|alright|correct|exactly|"
    r"ja(?:wohl)?|genau|einverstanden|passt|gerne|richtig|stimmt|leg\s+los|klar)(?=\W|$)",
    FLAGS,
)


CONTINUE = lazy_compile(
    r"\b(?:continue|proceed|go\s+on|carry\s+on|keep\s+going|mach\s+(?:bitte\s+)?weiter|"
    r"weitermachen|fahre?\s+fort)\b|^\W*weiter\W*$",
    FLAGS,
)


# A first-person subject right before "continue" makes it a statement about the user.
FIRST_PERSON_BEFORE = lazy_compile(
    r"\b(?:i|we|ich|wir)(?:'ll|'d|\s+will|\s+shall|\s+can|\s+could|\s+might|\s+would|"
    r"\s+want\s+to|\s+werde|\s+werden|\s+will|\s+wollen|\s+kann|\s+können)?\s*$",
    FLAGS,
)


NEGATION_START = lazy_compile(
    r"^\W*(?:no|nope|nah|nein|nee)(?=\W|$)(?!\W+(?:problem|worries|idea|way|need|thanks|"
    r"danke|sorgen)\b)",
    FLAGS,
)


NEGATION_ANY = lazy_compile(
    r"\b(?:that(?:'s|\s+is)\s+(?:wrong|incorrect|not\s+(?:right|correct|it|what\s+I\s+meant))|"
    r"you(?:'re|\s+are)\s+wrong|not\s+what\s+I\s+meant|"
    r"das\s+(?:ist|war)\s+falsch|(?:das\s+)?stimmt\s+(?:so\s+)?nicht|das\s+meinte\s+ich\s+nicht|"
    r"so\s+nicht)\b|^\W*(?:wrong|incorrect|falsch)\b",
    FLAGS,
)


# What came out of a command needs no "your": "is the header in the result?", "im Ergebnis" -
# the conversation has one result, the one the assistant just reported.
RESULT_REF = lazy_compile(
    r"\b(?:the|das|die|dem|im|vom|beim|aus\s+dem)\s+(" + "|".join(RESULT_NOUNS) + r")\b"
    r"(?!\s+(?:of|from|von|des|der|aus)\b)",  # "the result of the vote" names its own source
    FLAGS)


REF_EN = lazy_compile(
    r"\b(?:your|the\s+(?:previous|last|earlier)|that)\s+"
    r"(?:(?:last|previous|earlier|first|latest)\s+)?(" + "|".join(NOUNS_EN) + r")\b",
    FLAGS,
)


REF_DE = lazy_compile(
    r"\b(?:dein|deine|deinen|deinem|deiner|ihr|ihre|ihren|ihrem|ihrer|"
    r"(?:der|die|den|dem|das)\s+(?:vorherige[nmrs]?|letzte[nmrs]?|vorige[nmrs]?))\s+"
    r"(?:(?:letzte[nmrs]?|vorherige[nmrs]?|erste[nmrs]?)\s+)?(" + "|".join(NOUNS_DE) + r")\b",
    FLAGS,
)


SAID = lazy_compile(
    r"\b(?:what\s+did\s+you\s+(?:just\s+)?(?:say|suggest|mention|write|propose|recommend)|"
    r"was\s+(?:hast|hattest|habt|hattet|haben|hatten)\s+(?:du|ihr|sie)\b(?:\s+[\w-]+){0,4}?\s+"
    r"(?:gesagt|vorgeschlagen|geschrieben|erwähnt)|"
    r"was\s+du\b(?:\s+[\w-]+){1,4}?\s+(?:gesagt|vorgeschlagen|geschrieben|erwähnt)(?:\s+hast)?|"
    r"what\s+you\s+(?:just\s+)?(?:said|suggested|mentioned|wrote|proposed|recommended)|"
    r"(?:as|like)\s+you\s+(?:said|suggested)|you\s+(?:just\s+)?(?:said|mentioned)|"
    # what the assistant meant points back as what it said: "what did you mean by X",
    # "was meintest du mit X", "was hast du mit X gemeint"
    r"what\s+did\s+you\s+mean|what\s+you\s+meant|was\s+(?:meintest|meinten)\s+(?:du|sie|ihr)|"
    r"was\s+(?:hast|hattest|haben|hatten)\s+(?:du|sie|ihr)\b(?:\s+[\w-]+){0,4}?\s+gemeint|"
    r"was\s+(?:du|sie)\s+(?:gerade\s+|eben\s+)?(?:gesagt|vorgeschlagen|geschrieben|erwähnt)"
    r"(?:\s+(?:hast|haben))?|wie\s+(?:du|sie)\s+(?:gesagt|vorgeschlagen))\b",
    FLAGS,
)


SELECT = lazy_compile(
    r"\b(?:the|die|den|das|der|dem)\s+(" + "|".join(ORDINALS) + r")"
    r"(?:\s+(?:one|option|choice|item|variante|möglichkeit|punkt)\b|(?=\W*$))|"
    r"\b(?:option|number|nummer|nr\.?|punkt|variante)\s*(\d)\b|^\W*(\d)\W*$",
    FLAGS,
)


# German writes every noun with a capital: an article and an ordinal before a lower-case word
# ("Läuft der zweite fehlerfrei?") or nothing leave the noun out, as "the second one" does.
SELECT_ELIDED = lazy_compile(
    r"\b(?:die|den|das|der|dem)\s+(?:" + "|".join(ORDINALS_DE)
    + r")(?=\s+(?-i:[a-zäöüß])|\W*$)",
    FLAGS,
)


# German capitalises the noun after an ordinal: "die dritte Idee", "den zweiten Flug" - a
# selection when the last answer names that noun (its list header: "Drei Ideen:").
SELECT_NOUN_DE = lazy_compile(
    r"\b(?:die|den|das|der|dem)\s+(" + "|".join(ORDINALS_DE) + r")\s+(?-i:([A-ZÄÖÜ][\wäöüß-]+))", FLAGS)


NAMED_ID = lazy_compile(r"\s*[-#]?\s*\d")


DEMONSTRATIVE_EN = lazy_compile(r"\b(that|this|these|those)\s+([a-z][\w-]*)", FLAGS)


DEMONSTRATIVE_DE = lazy_compile(
    r"\b(diese[nmrs]?|dieses|jene[nmrs]?)\s+([A-ZÄÖÜ][\wäöüß-]*)", re.UNICODE
)


DEFINITE_TASK = lazy_compile(
    r"\b(?:the\s+(?:task|job|ticket)|(?:die|der|den|dem)\s+(?:aufgabe|auftrag|job|ticket))\b|"
    # "the command", "the update command", "den Update-Befehl", "das Tool"
    r"\b(?:the|that|this)\s+(?:[\w-]+\s+)?(?:command|tool)\b|"
    r"\b(?:den|dem|der|das|diesen|dieses)\s+(?:[\w-]+-)?(?:befehl|kommando|tool|werkzeug)\b", FLAGS
)


# "there"/"dort"/"da" point to a place, "then"/"damals" to a time. Existential "there is" and
# the conjunction "da" (a clause's first word: "Da es regnet, ...") do not.
PLACE_REF = lazy_compile(
    r"(?<!\bis\s)(?<!\bare\s)(?<!\bwas\s)(?<!\bwere\s)"  # "is there a GUI?" asks whether one exists
    r"\bthere\b(?!\s*(?:is|are|was|were|'s|'re|will|must|might|may|seems?|should|could|has|have)\b)"
    r"|(?<=\w\s)\b(?:dort|da)\b(?!\s*,)|\bdort(?:hin)?\b",
    FLAGS,
)


TIME_REF = lazy_compile(
    r"\b(?:at\s+that\s+time|back\s+then|damals|zu\s+dem\s+zeitpunkt|zu\s+der\s+zeit)\b"
    r"|\bthen\b(?=\s*(?:too|as\s+well)?\s*[?.!]*\s*$)",
    FLAGS,
)


# A fragment that only names a new object or place for the last action: "now for /var",
# "und für Anna auch", "same for /tmp", "and now on the staging server".
FRAGMENT = lazy_compile(
    r"^\W*(?:(?:and|now|also|then|ok(?:ay)?|again|once\s+more|but|und|jetzt|nun|auch|dann|bitte|"
    r"nochmal|noch\s+einmal|erneut|aber)\W+)*"
    r"(?:(?:the\s+)?same(?:\s+thing)?|dasselbe|das\s+gleiche|genauso)?\s*"
    r"(?:for|on|in|with|at|für|auf|mit|bei|im)\b",
    FLAGS,
)


# A verbless fragment that adds one more thing to the last request: "now the invoice too",
# "and butter as well", "und Butter auch", "jetzt noch den zweiten" - an opening "and/now"
# and an additive particle ("too", "as well", "auch", "noch"), a few words at most.
ADDITIVE = lazy_compile(
    r"^\W*(?:and|now|und|jetzt|nun)\b(?:\W+[\w/.-]+){1,4}?\W+(?:too|as\s+well|also|auch)\W*$"
    r"|^\W*(?:(?:and|und)\s+)?(?:now|jetzt|nun)\s+(?:noch|also|auch)\b",
    FLAGS,
)


ADDITIVE_WORDS = 6


# A query that opens on its topic and then asks: "About hashing: which parameters?"
TOPIC_FRONT = lazy_compile(
    r"^\W*(?:about|regarding|concerning|as\s+for|re|zum|zur|zu|über|bezüglich|betreffend|wegen)\s+"
    r"[^:,?!.]{2,40}[:,]",
    FLAGS,
)
