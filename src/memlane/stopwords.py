"""The one stopword source: function words and chat filler of English and German.

Its own module (memlane.language re-exports it) so that compound splitting, which the
language layer's keyword stems call, can leave function words alone without importing
the language layer back.
"""

from __future__ import annotations

__all__ = ["FILLER_DE", "FILLER_EN", "STOPWORDS", "STOPWORDS_DE", "STOPWORDS_EN"]

#: Function words: left out of keyword queries (BM25 would reward "the" and "und") and
#: counted by the language fallback for texts too short for character n-grams.
STOPWORDS_EN: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each few for from further had hadn't has hasn't have haven't having
    he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm
    i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor not
    of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's
    where where's which while who who's whom why why's with won't would wouldn't you you'd
    you'll you're you've your yours yourself yourselves also just really yeah yes ok okay oh hey
    hi wow did does do done get got go going went would will shall may might must
    """.split()
)

STOPWORDS_DE: frozenset[str] = frozenset(
    """
    der die das den dem des ein eine einer eines einem einen und oder aber ich du er sie es wir
    ihr mich dich sich uns euch mir dir ihm ihn ihnen ist sind war waren bin bist seid sein
    haben hat hatte hatten habe hast nicht kein keine keinen mit von zu zum zur im in an am auf
    aus bei nach vor für über unter um als wie wo was wer wenn dass daß so auch noch nur schon
    ja nein doch mal dann denn sehr hier da dort dieser diese dieses jetzt
    mein meine meinen meinem meiner meines dein deine deinen deinem deiner ihre ihren ihrem ihrer
    seine seinen seinem seiner unser unsere unseren unserem euer eure
    """.split()
)

#: Words that carry no topic in chat ("really", "thing", "planen", "heute") on top of the
#: function words: they end a keyphrase, but a keyword query keeps them.
FILLER_EN: frozenset[str] = frozenset(
    """
    almost although always among another anybody anyone anything anyway anyways anywhere around
    away back became become either else enough etc even ever every everybody everyone everything
    gets getting goes gone gotten however it'd it'll least less let lets like made make makes
    making many maybe mine much neither never next nobody none nothing now often one ones onto
    others otherwise per perhaps please quite rather said say says see seem seemed seems several
    since somebody someone something sometimes somewhat soon still sure therefore thing things
    though thus till together toward towards upon us via way well whatever whether whoever whole
    whose within without yet
    """.split()
)

FILLER_DE: frozenset[str] = frozenset(
    """
    alle allem allen aller alles also ander andere anderem anderen anderer anderes beim bis
    dabei dadurch dafür dagegen daher damit daran darauf darum davon dazu dein deine deinem
    deinen deiner denen dennoch deren deshalb dessen dies diesem diesen durch eben einige
    einigen einiger einmal etwa etwas euer eure gab gar gegen gewesen gibt ging hab hin hinter
    ihre ihrem ihren ihrer ihres immer ins jede jedem jeden jeder jedes jedoch jene kann kannst
    keinem keiner konnte können könnte man manche mehr mein meine meinem meinen meiner meines
    muss musste müssen nichts nun ob ohne seine seinem seinen seiner seit selbst sollen sollte
    sondern sowie unser unsere viel vom warst weil weiter welche welchem welchen welcher welches
    werde werden wieder will wird wirst wollen wollte würde würden zwar zwischen ganz gerne gern
    halt eigentlich wirklich okay hallo danke bitte genau klar toll super kommen kommt komme
    gehen geht gehe machen macht mache planen plant plane finden findet finde sagen sagt sage
    glaube glaubt heute morgen gestern ok
    """.split()
)

STOPWORDS: frozenset[str] = STOPWORDS_EN | STOPWORDS_DE
