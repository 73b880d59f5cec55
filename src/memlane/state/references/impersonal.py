""""It" and "es" that point at nothing: weather, clock time, light, durations and
placeholders for a clause that follows ("it is important to ...", "es fällt mir schwer, ... zu")."""

from __future__ import annotations

from memlane.patterns import lazy_compile
from memlane.state.references.lexicon import FLAGS

EXPLETIVE_EN = lazy_compile(
    r"\bit(?:'s|\s+is|\s+was)\s+(?:time|raining|snowing|late|early|possible|likely|important|"
    r"necessary|hard|easy|true|nice|great|good|fine|okay|ok)\b|"
    r"\bit\s+(?:seems|looks|depends|turns\s+out|appears|rains)\b|"
    r"\bhow(?:'s|\s+is|\s+was)\s+it\s+going\b|\bis\s+it\s+(?:possible|ok|okay|safe|true|"
    r"necessary|normal|worth)\b|\bmake\s+it\s+(?:to|happen)\b|"
    # weather and clock time have no referent: "is it raining", "what time is it"
    r"\bit\b[^.?!,;]{0,24}?\b(?:rain|snow|hail|drizzl|thunder|freez)\w*|\btime\s+is\s+it\b|"
    # a placeholder for a clause that follows: "it is important to back up"
    r"\bit(?:'s|\s+is|\s+was)\s+\w+\s+(?:to|that)\b|"
    # light, temperature and the hour as a state "it" is in or gets into: "it's getting dark",
    # "it'll be pitch-dark soon", "it was already too late"
    r"\bit(?:'s|'ll\s+be|\s+is|\s+was|\s+will\s+be|\s+gets|\s+got|\s+becomes|\s+became|"
    r"(?:'s|\s+has|\s+had)\s+been)\s+(?:(?:getting|becoming|going\s+to\s+be|already|still|so|"
    r"very|too|really|quite|pretty|rather|almost|nearly|way|\w+ly)\s+)*"
    r"(?:[\w-]+-)?(?:dark|light|bright|cold|hot|warm|cool|chilly|freezing|humid|sunny|cloudy|"
    r"windy|foggy|stormy|late|early|noon|midnight)\b|"
    # a stretch of time as the subject's state: "it's been a long day", "it has been ages"
    r"\bit(?:'s|\s+has|\s+had)\s+been\s+(?:(?:a|an|such\s+a|so|too)\s+)?(?:[\w-]+\s+){0,2}"
    r"(?:day|days|week|weeks|month|months|year|years|while|ages|night)\b|"
    # a duration has no referent: "how long does it take to ...", "it takes ages until ..."
    r"\bhow\s+(?:long|much\s+time)\s+(?:does|did|will|would|could|might|should)\s+it\s+take\b|"
    r"\bit\s+(?:takes|took|will\s+take)\s+(?:ages|forever|long|a\s+while|(?:a\s+few|\d+|\w+)\s+"
    r"(?:minutes|hours|days|weeks|months|years))\b|\bit\b[^.?!,;]{0,30}\b(?:until|till)\b|"
    # "matter" and "seem" take an impersonal subject: "it doesn't matter", "does it matter"
    r"\bit\s+(?:doesn't|does\s+not|didn't|did\s+not|won't|wouldn't|don't)\s+(?:matter|seem)\b|"
    # a gerund clause that follows: "it's worth starting early", "it's no use asking"
    r"\bit(?:'s|\s+is|\s+was)\s+(?:(?:not|no|really|definitely|still)\s+)?(?:worth|use|good)\s+\w+ing\b|"
    r"\b(?:does|did|will|would)\s+it\s+(?:matter|seem)\b|\bit\s+(?:matters|mattered|seemed)\b",
    FLAGS,
)


#: German predicates of light, temperature and the hour ("eiskalt", "stockdunkel" are compounds).
_STATE_DE = (
    r"(?:[a-zäöüß]*(?:kalt|warm|heiß|kühl|dunkel|spät|früh|schwül|windig|neblig|sonnig|bewölkt|"
    r"frostig|stürmisch)|hell|nacht|abend|tag|mittag|winter|sommer|herbst|frühling)"
)


EXPLETIVE_DE = lazy_compile(
    r"\bes\s+(?:gibt|geht|regnet|schneit|tut\s+mir\s+leid|sei\s+denn|kommt\s+darauf\s+an)\b|"
    r"\b(?:gibt|geht|ging|gab)\s+es\b|\bwie\s+geht'?s\b|"
    # weather, clock time and temperature: "regnet es", "wie spät ist es", "es ist kalt"
    # weather verbs in any tense and order ("wird es morgen regnen"), clock time ("Uhr ist es")
    r"\bes\b[^.?!,;]{0,24}?\b(?:regn|schnei|hagel|donner|blitz|niesel|frier)\w*|"
    r"\b(?:regn|schnei|hagel|donner|blitz|niesel|frier)\w*\s+es\b|\b(?:spät|uhr)\s+ist\s+es\b|"
    # "es" as the subject of a state of light, temperature or the hour, in either order and
    # with any copula: "es wird schon dunkel", "ist es noch zu früh", "es bleibt heute eiskalt"
    r"(?:\bes\s+(?:ist|war|wird|wurde|bleibt|blieb|würde)|\b(?:ist|war|wird|wurde|bleibt|blieb)\s+es)"
    r"\s+(?:(?:so|sehr|zu|schon|noch|ganz|ziemlich|echt|langsam|gleich|bald|heute|morgen|jetzt|"
    r"hier|draußen|drinnen|wieder|immer|ja|aber|wohl|recht|total|viel|etwas|richtig|bereits)\s+)*"
    + _STATE_DE + r"\b|"
    # a placeholder for a clause that follows: "es ist wichtig, ... zu", "kommt es vor, dass"
    r"\bes\b[^.?!]*,\s*(?:dass|zu|wenn|ob|bis)\b|\bes\b[^.?!,]*\bvor,?\s+dass\b|"
    # ... or an extraposed infinitive: "es fällt mir schwer, jeden Tag zu üben"
    # (a separable verb takes "zu" inside: "es lohnt sich, früh loszugehen")
    r"\bes\b[^.?!]*,[^.?!,]*\b(?:zu\s+[a-zäöüß]+|[a-zäöüß]{2,}zu[a-zäöüß]{2,}en)\s*[.!?]*\s*$|"
    # durations and "schwer/leicht fallen" take an impersonal subject: "wie lange dauert es"
    r"\bwie\s+(?:lange|viel\s+zeit)\s+(?:dauert|dauerte|braucht|brauchte)\s+es\b|"
    r"\bes\s+fällt\s+\w+\s+(?:\w+\s+)?(?:schwer|leicht)\b|\bfällt\s+es\s+\w+\s+(?:\w+\s+)?(?:schwer|leicht)\b|"
    r"^\W*es\s+ist\s+[a-zäöüß]+\s*,",
    FLAGS,
)


#: A pronominal adverb ("darauf", "davon") that announces the clause after it points forward,
#: maybe behind its verb's particle ("es kommt darauf an, wie ...").
CATAPHORIC = lazy_compile(r"(?:\s+[a-zäöüß]+)?\s*,\s*(?:wie|ob|dass|was|wann|wo|wer|welche[mnrs]?|zu)\b", FLAGS)
