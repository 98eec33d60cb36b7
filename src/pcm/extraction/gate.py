"""The small-talk gate: whether an utterance states anything worth a model call, decided without a model.

Why. Extraction costs one model call per utterance (about 100 s with a 1.5B model on this machine), and a large share
of a conversation states nothing: greetings, thanks, "sounds great", a question back. The gate keeps those from the
model; the post is stored with the status ``gated`` (``pcm extract --gated`` extracts them on demand).

How. The utterance is cut into sentences and words; each word is small talk (a greeting, thanks, agreement, a
farewell, praise), a function word (pronoun, article, auxiliary, preposition, light verb, question word), a vocative
(the name of the person spoken to, "Thanks, Mel!"), or content. Anything that looks like a fact lets the utterance
through at once: digits, a number word, a link or handle, a currency sign, a capitalised name inside a sentence.
Else it passes when one of its sentences has content, except two kinds of sentence that speak to the other person
and tell nothing of the speaker (no first-person word): a short question back ("How long have you been married?",
"What got you into climbing?") and a short reaction that points at something and praises it ("That bowl is
gorgeous!", "What a find!"). A question with a first-person word passes ("Did I tell you I adopted a dog?"). A reply
that states a fact only with the turn before passes too: a yes or no, or a pronoun and an auxiliary, answering a
yes/no question ("Ever been skiing?" "Nope, never.", "Did you go?" "I did!"), and an echo of news ("I'm vegan." "Me
too!"). Everything the lists do not know is content, so an unknown word, an unknown language or a typo passes: the
errors go the cheap way (a model call spent on small talk), not the costly one (a fact never extracted).

Measured by ``python benchmarks/bench_gate.py`` (figures in docs/benchmarks.md): the question and reaction rules
each raise the share of small talk held back at no loss of recall on the labelled utterances.

The lists (:data:`SMALL_TALK`) cover English, French, German, Spanish, and the commonest small talk of Italian,
Portuguese and Dutch. Words are compared case-folded and without accents, so "Génial", "genial" and "GENIAL" are
one word. Deterministic and pure: a few set look-ups per word, well under a millisecond for an utterance.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from pcm.words import fold as fold_text

#: Most content words a reaction sentence may have ("That charity race sounds great!": two). Measured on the labelled
#: utterances of tests/fixtures/extraction (benchmarks/bench_gate.py).
REACTION_WORDS: Final = 2
#: Most content words a question back may have. A longer question usually carries the asker's own situation ("...for
#: a room with a cat that sheds a lot?"): on LongMemEval's requests to an assistant, no cap held back 1.8% of the
#: turns, this one 0.3%; the labelled figures are the same from 4 up, and 3 lets two labelled questions back pass.
QUESTION_WORDS: Final = 4
#: Longer utterances pass unread: small talk is short (the longest held back in conv-26 has 250 characters), and
#: this bounds the gate's time on a long text.
LONG_CHARS: Final = 1000
#: The report stored with a post the gate held back (its provenance shows it; ``pcm extract --gated`` redoes it).
GATED_REPORT: Final = "gated: states no fact (small talk)"


#: A word as the lists hold it (:func:`pcm.extraction.said_dates.fold`); cached, since a conversation repeats its
#: words.
fold = lru_cache(maxsize=65536)(fold_text)


@dataclass(frozen=True)
class SmallTalkLexicon:
    """The words the gate reads, by role and language. Why each list exists:

    - ``phatic``: words that keep a conversation going without telling anything (greetings, thanks, agreement,
      farewells, praise and reactions, politeness). An utterance made only of these and function words states
      nothing. They also introduce a vocative: a capitalised word right after one ("Thanks, Mel!") is the person
      spoken to, not a fact.
    - ``phrases``: small talk whose words are content on their own ("take care", "good job", "bis bald", "hasta
      luego", "ça marche"): matched only as a whole, so "I take care of my mother" keeps its content.
    - ``function``: pronouns, articles, auxiliaries, prepositions, conjunctions, common adverbs, question words and
      light verbs (get, make, go, think, say, want...). They carry the grammar of a fact, never the fact itself.
    - ``answers``: yes, no, never. A bare one after a question answers it, and so states a fact in context ("Do you
      have pets?" "Yes!"); the gate lets it pass.
    - ``auxiliaries``: do, did, am, have... A reply made of a pronoun and one of them answers a yes/no question
      too ("Did you go to the party?" "I did!").
    - ``question_words``: what, how, où, wie, cómo... A question opening with one (after ``openers``) asks for more
      than yes or no, so a bare "yes" or "I am good" after it is no answer ("How are you?" "I am good, thanks!").
    - ``openers``: and, so, well, et, alors, und, pues: words before a question's first real word.
    - ``echoes``: "me too", "same here", "moi aussi", "ich auch", "yo también": agreement that takes over what the
      other person just said about themselves ("I'm allergic to nuts." "Me too!"); it passes when that turn states
      something.
    - ``numbers``: number words (three, trois, drei, tres...): an amount or a count is a fact ("keep running three
      days a week"), as digits are. Words that are also something else in a covered language are left out (French
      "très" folds to Spanish "tres"; Italian "sei" is "you are"; English "once").
    - ``first_person``: I, me, my, we, our. A sentence with one of them may tell something about the speaker, so
      its content always counts, even in a question ("Did I tell you I adopted a dog?").
    - ``addressee``: you, your. With ``pointing``, what marks a sentence as a reaction to what the other person
      said or showed rather than news ("Your garden is lovely!").
    - ``pointing``: demonstratives and exclamatives (that, this, what a, how; ce, quel; das, was für; ese, qué).
      A sentence without a first-person word that points at something, praises it (a ``phatic`` word) and has at
      most :data:`REACTION_WORDS` content words is a reaction ("That bowl is gorgeous!", "What an amazing photo!").
    - ``noun_markers``: German articles and determiners. German writes every noun with a capital, so a capitalised
      word just after one of these ("das Foto", "ein tolles Foto") is a noun, read as any content word, not a name.
    - ``capitalised``: function words written with a capital inside a sentence by convention (English "I", German
      "Sie"/"Ihnen", Spanish "Usted"). Any other listed word capitalised inside a sentence is read as a name ("see
      you in May", "ask Will").

    A word that is content in one covered language is kept out of every list even if it is a function word in
    another ("car" is "because" in French, "Kind" is "child" in German, "bald" is "soon" only in "bis bald"). No
    list holds the wording of a test conversation: they are the common small talk of each language.
    """

    phatic: Mapping[str, str]
    phrases: Mapping[str, str]
    function: Mapping[str, str]
    answers: Mapping[str, str]
    auxiliaries: Mapping[str, str]
    question_words: Mapping[str, str]
    openers: Mapping[str, str]
    echoes: Mapping[str, str]
    numbers: Mapping[str, str]
    first_person: Mapping[str, str]
    addressee: Mapping[str, str]
    pointing: Mapping[str, str]
    noun_markers: Mapping[str, str]
    capitalised: str

    def words(self, field: str) -> frozenset[str]:
        """Every word of one single-word list, all languages together, folded."""
        table: Mapping[str, str] = getattr(self, field)
        return frozenset(fold(w) for text in table.values() for w in text.split())

    def phrase_set(self, field: str = "phrases") -> frozenset[tuple[str, ...]]:
        """One phrase list (``phrases`` or ``echoes``) as folded word tuples, cut the way an utterance is cut."""
        out = set()
        table: Mapping[str, str] = getattr(self, field)
        for text in table.values():
            for phrase in text.split(";"):
                words = tuple(fold(w) for w in _WORD.findall(_expand_contractions(phrase)))
                if words:
                    out.add(words)
        return frozenset(out)


SMALL_TALK: Final = SmallTalkLexicon(
    phatic={
        "en": """hi hello hey hiya howdy heya greetings welcome thanks thank thx tks ty tysm cheers appreciate
            appreciated grateful thankful congrats congratulations bravo kudos yay woohoo hooray hurray yes yeah yep
            yup yea aye ok okay okey kk alright sure certainly absolutely definitely totally exactly indeed agreed
            agree true right correct precisely no nope nah bye goodbye byebye cya farewell goodnight wow whoa woah
            oh ah aw oops ugh hmm hm um uh huh phew yikes gosh omg oof cool nice great awesome amazing wonderful
            lovely fantastic fabulous excellent perfect brilliant super sweet neat terrific incredible gorgeous
            beautiful stunning adorable cute fun funny hilarious interesting inspiring impressive glad happy pleased
            delighted excited thrilled stoked proud lucky sorry please pardon fine good well best better love loved
            lol lmao rofl xd idea point question tip tips advice chat chatting exciting delicious yummy tasty""",
        "fr": """bonjour bonsoir salut coucou allo merci remercie felicitations oui ouais ouaip voila exact
            exactement evidemment absolument certainement carrement parfait parfaitement super genial geniale top
            chouette cool sympa excellent formidable magnifique incroyable adorable mignon mignonne bien bon bonne
            vrai ok okay non nan bof oups waouh ouah ouf desole desolee pardon excuse excusez stp svp plait content
            contente ravi ravie heureux heureuse fier fiere adore aime mdr ptdr bisous bises ciao tchao bravo
            beau belle joli jolie superbe sublime delicieux delicieuse""",
        "de": """hallo servus moin gruss gruezi danke dankeschon merci bitte bitteschon gern gerne gluckwunsch
            herzlichen ja jap jo jep jawohl genau klar sicher stimmt richtig naturlich absolut definitiv okay ok nein
            nee noe super toll prima klasse cool geil spitze wunderbar wundervoll herrlich perfekt schon nett lieb
            suss witzig lustig interessant spannend krass ach oje huch tschuss tschau ciao entschuldigung sorry froh
            gut freut wunderschon hubsch lecker""",
        "es": """hola buenas buenos gracias agradezco agradecido agradecida felicidades enhorabuena felicitaciones
            vale claro exacto exactamente cierto verdad correcto perfecto genial estupendo fantastico increible
            maravilloso precioso bonito guay chulo chevere bacan buenisimo bueno buena okey adios chao chau cuidate
            perdon perdona disculpa disculpe ay uy vaya guau ole feliz contento contenta orgulloso orgullosa encanta
            gusta bonita lindo linda hermoso hermosa preciosa delicioso deliciosa""",
        "it": """ciao salve buongiorno buonasera buonanotte grazie prego certo esatto perfetto bello bella
            bellissimo fantastico ottimo benissimo bene arrivederci scusa scusami dai evviva complimenti buonissimo
            delizioso""",
        "pt": "ola oi obrigado obrigada valeu sim exato perfeito otimo legal beleza tchau parabens desculpa",
        "nl": "hoi doei bedankt dankjewel dankuwel leuk mooi geweldig fijn",
    },
    phrases={
        "en": """thank you; see you; see ya; talk soon; talk to you soon; take care; good luck; best of luck;
            stay safe; have fun; keep you posted; keep ya posted; reach out; no problem; no worries; you are welcome;
            my pleasure; good night; good morning; good evening; good afternoon; of course; for sure; never mind;
            long time no see; long time no talk; what is up; whats up; catch up; all the best; well done; good job;
            nice job; great job; way to go; makes sense; make sense; hang in there; get well soon; bless you;
            sounds like a plan; you too; take it easy; have a good one; so kind; very kind;
            too kind; kind words; kind of you; nice weekend; good weekend; great weekend; lovely weekend""",
        "fr": """s il te plait; s il vous plait; de rien; pas de souci; pas de soucis; pas de probleme; a bientot;
            a plus; a plus tard; a demain; au revoir; bonne journee; bonne soiree; bonne nuit; bon courage; bonne
            chance; ca marche; ca roule; ca va; tout a fait; bien sur; d accord; pas mal; a la prochaine; prends soin
            de toi; mille mercis; bon week end; bon weekend; avec plaisir; je t en prie; je vous en prie; l air""",
        "de": """vielen dank; danke schon; herzlichen dank; guten morgen; guten tag; guten abend; gute nacht;
            bis bald; bis spater; bis morgen; bis dann; auf wiedersehen; mach s gut; macht s gut; alles gute;
            alles klar; kein problem; keine ursache; gern geschehen; tut mir leid; freut mich; viel spass;
            viel gluck; schones wochenende; wie geht s; na klar; passt schon""",
        "es": """muchas gracias; mil gracias; de nada; buenos dias; buenas tardes; buenas noches; hasta luego;
            hasta pronto; hasta manana; nos vemos; que tal; lo siento; me alegro; por supuesto; de acuerdo;
            no pasa nada; buena suerte; que te vaya bien; que lo pases bien; feliz dia; ni idea; con gusto""",
        "it": "grazie mille; va bene; a presto; buona giornata; buona serata; buona notte; d accordo; di niente",
        "pt": "muito obrigado; muito obrigada; tudo bem; ate logo; ate mais; bom dia; boa noite; boa tarde; de nada",
        "nl": "tot ziens; tot straks; tot morgen; goedemorgen; dank je; dank je wel; geen probleem",
    },
    function={
        "en": """a an the this that these those it its itself i me my mine myself we us our ours ourselves you your
            yours yourself yourselves ya u ur he him his she her hers they them their theirs themselves one ones
            someone something anything everything nothing anyone everyone somebody anybody everybody is am are was
            were be been being do does did doing done have has had having will would shall should can could may
            might must ll re ve d s t m not nor and or but so if then than because as of at by for with about
            against between into through during before after above below to from up down in out on off over under
            again once here there when where why how what which who whom whose all any both each few more most other
            some such only own same too very just also still even really quite pretty rather much many lot lots bit
            little enough sort like yet already ever always never sometimes often now today anyway though although
            while since until etc else maybe perhaps probably actually basically honestly seriously literally get
            gets got getting gotten make makes made making go goes went going gone gonna wanna gotta come comes came
            coming take takes took taking give gives gave let lets see sees saw seen seeing look looks looked looking
            sound sounds sounded seem seems seemed know knows knew known think thinks thought thinking say says said
            saying tell tells told talk talking hear heard feel feels felt feeling mean means meant want wants wanted
            need needs needed hope hoping wish try trying keep keeping wait happen happened happening thing things
            stuff way time day new lately recently soon later enjoy enjoyed share sharing meet met guess dont cant
            didnt doesnt isnt wasnt wouldnt couldnt shouldnt im ive youre youve thats whats hows theres hes shes
            theyre weve""",
        "fr": """le la les l un une des du de d au aux ce cet cette ces c ca cela ceci celui celle ceux je j me m moi
            mon ma mes tu t te toi ton ta tes il elle on nous vous ils elles lui leur leurs se s sa son ses notre nos
            votre vos y en qui que qu quoi dont ou est es suis sommes etes sont etait etais ete etre ai as a avons
            avez ont avais avait eu avoir fait faire fais va vais vas allez allons aller vient venir peux peut
            pouvoir veux veut vouloir dois doit sais sait savoir crois pense trouve dit dire vois voir ne n pas plus
            moins tres trop aussi encore deja toujours jamais rien tout tous toute toutes chose choses truc et mais
            donc ni si comme quand comment pourquoi combien quel quelle quels quelles avec sans pour par dans sur
            sous chez entre vers depuis pendant avant apres ici voici alors puis enfin juste vraiment assez beaucoup
            peu tellement quelque quelqu autre autres meme ensemble maintenant aujourd hui fois temps nouveau quoi
            neuf""",
        "de": """der die das den dem des ein eine einen einem einer eines ich mich mir mein meine meinen meinem meiner
            du dich dir dein deine deinen er ihn ihm sein seine seinen sie ihr ihre ihren ihrem ihnen es wir uns
            unser unsere euch euer man sich bin bist ist sind seid war waren warst gewesen habe hab hast hat haben
            habt hatte hatten gehabt werde wirst wird werden wurde geworden kann kannst konnen konnte muss mussen
            soll sollte will willst mochte mag darf nicht kein keine keinen nichts und oder aber denn doch sondern
            wenn dann als wie was wer wo wann warum wieso welche welcher welches mit ohne fur von vom zu zum zur bei
            beim nach aus auf an am im in um uber unter vor durch gegen auch noch nur sehr so ganz echt wirklich mal
            halt eben viel viele etwas alles alle hier da dort jetzt heute immer nie oft gerade eigentlich
            vielleicht wohl geht gehts gehen machen macht gemacht sagen gesagt finde finden denke glaube klingt
            klingen sieht aussieht ding sache dabei dafur damit davon dazu neues""",
        "es": """el la los las lo un una unos unas al del de a en con por para sobre entre hasta desde hacia yo me mi
            mis tu te ti tus usted ustedes ella ellos ellas le les se su sus nos nosotros nosotras vosotros os
            nuestro nuestra vuestro que quien quienes cual como cuando donde cuanto porque pues y e o u ni pero sino
            si no ya muy mas menos tan tanto mucho mucha muchos poco bien tambien todavia aun siempre nunca todo
            toda todos todas nada algo alguien nadie otro otra este esta esto estos estas ese esa eso aqui ahi alli
            ahora hoy es soy eres somos son era fue fui ser sido estoy estamos estan estaba estado estar he has ha
            hemos han habia haber hay tengo tienes tiene tenemos tienen tener hago hace hacer voy vas va vamos van
            ir puedo puede quiero quiere sabe creo pienso parece suena dice veo ver cosa cosas vez tal nuevo""",
        "it": """il lo la i gli le un uno una di da in con su per tra fra che chi come quando dove perche e o ma anche
            non mi ti ci vi si io tu lui lei noi voi loro mio mia tuo tua sono sei siamo siete ho hai ha abbiamo
            hanno molto tanto tutto tutti va sembra sembrano""",
        "pt": """o os as um uma do da dos das em no na com por para que eu tu voce ele ela nos eles meu minha seu
            sua sou esta estou tem tenho muito tudo bem vai""",
        "nl": "ik je jij u het een de dat dit en of maar ook heel erg ben is zijn wel niet",
    },
    answers={
        "en": """yes yeah yep yup yea sure absolutely definitely certainly correct right exactly indeed no nope nah
            never""",
        "fr": "oui ouais ouaip non nan exactement absolument jamais",
        "de": "ja jap jo jep jawohl genau doch nein nee noe nie niemals",
        "es": "si claro exacto no nunca",
        "it": "si certo no",
        "pt": "sim nao",
        "nl": "ja nee",
    },
    auxiliaries={
        "en": "do does did am is are was were have has had will would can could",
        "fr": "suis es est sommes sont ai as a avons ont etais etait",
        "de": "bin bist ist sind war habe hab hast hat haben hatte",
        "es": "soy eres es estoy esta tengo tiene he has ha fui fue",
        "it": "sono ho ha",
        "pt": "sou estou tenho",
        "nl": "ben heb",
    },
    question_words={
        "en": "what whats how hows why where wheres when who whom whose which",
        "fr": "quoi comment pourquoi ou quand qui quel quelle quels quelles combien que qu",
        "de": "was wie warum wieso weshalb wo woher wohin wann wer wen wem welche welcher welches",
        "es": "que como por donde cuando quien quienes cual cuales cuanto cuanta",
        "it": "cosa come perche dove quando chi quale quanto che",
        "pt": "que como onde quando quem qual quanto",
        "nl": "wat hoe waarom waar wanneer wie welke",
    },
    openers={
        "en": "and so but well then also anyway",
        "fr": "et alors donc mais bon",
        "de": "und also aber dann na",
        "es": "y pues entonces pero bueno",
        "it": "e ma allora",
        "pt": "e mas entao",
        "nl": "en maar dus",
    },
    echoes={
        "en": "me too; same here; me neither; same for me; so do i; so am i; so did i",
        "fr": "moi aussi; moi non plus; pareil pour moi; moi pareil",
        "de": "ich auch; ich auch nicht; mir auch; geht mir genauso; mir geht es genauso",
        "es": "yo tambien; yo tampoco; a mi tambien; igual yo",
        "it": "anch io; anche io; neanche io",
        "pt": "eu tambem; eu tampouco",
        "nl": "ik ook; ik ook niet",
    },
    numbers={
        "en": """two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
            eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand dozen""",
        "fr": "deux trois quatre cinq six sept huit neuf dix onze douze quinze vingt trente quarante cinquante cent",
        "de": "zwei drei vier funf sechs sieben acht neun zehn elf zwolf zwanzig dreissig vierzig hundert tausend",
        "es": "dos cuatro cinco seis siete ocho nueve diez doce quince veinte treinta cuarenta cincuenta cien",
        "it": "due quattro cinque sette otto nove dieci dodici venti trenta cento",
        "pt": "dois duas quatro cinco sete oito nove dez doze vinte trinta cem",
        "nl": "twee drie vier vijf zes zeven acht negen tien twaalf twintig honderd",
    },
    first_person={
        "en": "i me my mine myself we us our ours ourselves im ive",
        "fr": "je j me m moi mon ma mes nous notre nos",
        "de": "ich mich mir mein meine meinen meinem meiner wir uns unser unsere unseren unserem",
        "es": "yo me mi mis conmigo nosotros nosotras nuestro nuestra nuestros nuestras",
        "it": "io mi mio mia miei mie noi nostro nostra",
        "pt": "eu meu minha meus minhas nos nosso nossa",
        "nl": "ik mij mijn wij ons onze",
    },
    addressee={
        "en": "you your yours yourself yourselves ya u ur youre youve",
        "fr": "tu te toi ton ta tes vous votre vos",
        "de": "du dich dir dein deine deinen deinem euch euer eure",
        "es": "tu te ti tus usted ustedes vosotros vuestro vuestra",
        "it": "ti tuo tua voi vostro",
        "pt": "voce teu tua seu sua",
        "nl": "jij jou jouw je",
    },
    pointing={
        "en": "that this these those such what how so",
        "fr": "ce cet cette ces ca cela quel quelle quels quelles que",
        "de": "das dies diese dieser dieses was wie so",
        "es": "ese esa eso este esta esto que como tan",
        "it": "questo questa quello quella che come",
        "pt": "esse essa isso este esta isto que como",
        "nl": "dat dit wat hoe zo",
    },
    noun_markers={
        "de": """der die das den dem des ein eine einen einem einer eines mein meine meinen dein deine sein seine
            ihr ihre unser unsere kein keine diese dieser dieses jede jeder jedes im am vom zum zur beim""",
    },
    capitalised="i sie ihnen ihr ihre ihren ihrem ihrer du dir dich dein deine euch euer usted ustedes ud uds vd lei",
)

_WORD = re.compile(r"[^\W_]+")
#: Where a sentence starts: the text before a word holds one of these (or nothing: the first word).
_SENTENCE_END = re.compile(r"[.!?…:;\n\"“”«»(¡¿]")
#: Where one sentence ends and the next begins, for reading sentence by sentence.
_SENTENCE_BREAK = re.compile(r"[.!?…:;\n]")
#: Between a small-talk word and a vocative: spaces and commas only ("Thanks, Mel!", "Hey Caroline").
_VOCATIVE_GAP = re.compile(r"[\s,]*")
#: After a vocative: the end, or punctuation that closes the address ("Thanks, Mel!", "Wow, Caroline, ...").
_VOCATIVE_END = re.compile(r"\s*(?:[,.!?…;:)]|$)")
_CONTRACTION = re.compile(r"\b([^\W\d_]+?)n['’]t\b")
_DIGIT = re.compile(r"\d")
_LINK = re.compile(r"https?://|www\.|[@#][^\W_]|[^\W_]\.(?:com|org|net|io|de|fr|es)\b|[$€£¥₹]", re.IGNORECASE)
#: Laughter and drawn-out interjections in any of the languages: haha, jajaja, hihi, mdr, xD, awww, ohhh, hmmm.
_NOISE = re.compile(
    r"(?:[hj][aeiou]){2,}[hj]?|x+d+|k{3,}|(?:rs){2,}|a+w+|o+h+|a+h+|u+h+|h+m+|m+h*|e+h+|w+o+w+|y+a+y+|u+g+h+|o+p+s+"
)
_REPEAT = re.compile(r"(.)\1{2,}")


@dataclass
class _Sentence:
    """What the gate has seen of one sentence so far (see :meth:`SmallTalkGate.decide`)."""

    content: list[str] = field(default_factory=list)
    first_person: bool = False
    addressee: bool = False
    pointing: bool = False
    praise: bool = False
    opening: str = ""
    why: str = ""

    def see(self, word: str, gate: SmallTalkGate, *, phrase: bool) -> None:
        """Note one word (``phrase``: it is part of a small-talk phrase, which praises or thanks as a phatic word
        does)."""
        self.opening = self.opening or word
        self.first_person = self.first_person or word in gate.first_person
        self.addressee = self.addressee or word in gate.addressee
        self.pointing = self.pointing or word in gate.pointing
        self.praise = self.praise or phrase or word in gate.phatic

    def states(self, gate: SmallTalkGate, end: str) -> str | None:
        """The sentence's first content word when it may state a fact, else None (``why`` says what it is).

        ``end``: the text after its last word (its punctuation). Content counts unless the sentence is a short
        question without a first-person word (it asks the other person: "How long have you been married?") or a
        reaction (no first-person word, points at something and praises it or exclaims, few content words: "That
        bowl is gorgeous!", "What a find!")."""
        if not self.content:
            return None
        if self.first_person:
            return self.content[0]
        if "?" in end:
            if len(self.content) > QUESTION_WORDS:
                return self.content[0]
            self.why = "a question to the other person"
            return None
        exclaims = "!" in end and self.opening in gate.pointing
        if len(self.content) <= REACTION_WORDS and (self.pointing or self.addressee) and (self.praise or exclaims):
            self.why = "a reaction"
            return None
        return self.content[0]


@dataclass(frozen=True)
class GateDecision:
    """Whether an utterance goes to the model, and the signal that decided it (for benchmarks and eyeballing)."""

    passes: bool
    reason: str


class SmallTalkGate:
    """The gate over one lexicon (:data:`SMALL_TALK` by default); stateless once built, so threads may share it."""

    def __init__(self, lexicon: SmallTalkLexicon = SMALL_TALK) -> None:
        self.phatic = lexicon.words("phatic")
        self.function = lexicon.words("function")
        self.answers = lexicon.words("answers")
        self.capitalised = frozenset(fold(w) for w in lexicon.capitalised.split())
        self.numbers = lexicon.words("numbers")
        self.first_person = lexicon.words("first_person")
        self.addressee = lexicon.words("addressee")
        self.pointing = lexicon.words("pointing")
        self.noun_markers = lexicon.words("noun_markers")
        self.auxiliaries = lexicon.words("auxiliaries")
        self.question_words = lexicon.words("question_words")
        self.openers = lexicon.words("openers")
        self.listed = self.phatic | self.function | self.answers
        self.echoes = lexicon.phrase_set("echoes")
        phrases = lexicon.phrase_set() | self.echoes
        self.phrases: dict[str, tuple[tuple[str, ...], ...]] = {}
        for phrase in sorted(phrases, key=len, reverse=True):  # longest first
            self.phrases[phrase[0]] = (*self.phrases.get(phrase[0], ()), phrase)

    def decide(self, text: str, *, names: Iterable[str] = (), previous: str | None = None) -> GateDecision:
        """Whether ``text`` may state a fact (then it goes to the model).

        ``names``: the people in the conversation (a word that is one of them, or its start such as "Mel" for
        "Melanie", is the person addressed, not content). ``previous``: the turn before, when someone else said it
        (a reply without content passes when it answers it or echoes it: :meth:`_replies`).
        """
        if len(text) > LONG_CHARS:
            return GateDecision(True, "long")
        if _DIGIT.search(text):
            return GateDecision(True, "digits")
        if _LINK.search(text):
            return GateDecision(True, "link, handle or currency")
        text = _expand_contractions(text)
        matches = list(_WORD.finditer(text))
        if not matches:
            return GateDecision(False, "no words")
        folded = [_known(fold(m.group()), self.listed) for m in matches]
        small, echo = self._phrase_cover(folded)
        case_matters = any(c.isupper() for c in text) and not text.isupper()
        spoken_to = _name_parts(names)
        answer = auxiliary = False
        sentence = _Sentence()
        discounted = ""
        for i, (match, word) in enumerate(zip(matches, folded, strict=True)):
            raw = match.group()
            starts = _sentence_start(text, matches, i)
            if i and _breaks(text[matches[i - 1].end() : match.start()], _SENTENCE_BREAK):
                said = sentence.states(self, text[matches[i - 1].end() : match.start()])
                if said is not None:
                    return GateDecision(True, f"content {said!r}")
                discounted = discounted or sentence.why
                sentence = _Sentence()
            titled = case_matters and raw[:1].isupper() and (len(raw) == 1 or not raw.isupper())
            sentence.see(word, self, phrase=i in small)
            answer = answer or word in self.answers
            auxiliary = auxiliary or word in self.auxiliaries
            if i in small or len(word) == 1 or _NOISE.fullmatch(word) or word in self.phatic:
                continue
            if word in self.numbers:
                return GateDecision(True, f"number {raw!r}")
            if word in self.function:
                if titled and not starts and word not in self.capitalised:
                    return GateDecision(True, f"name {raw!r}")
                continue
            if (titled or not case_matters) and _is_name(word, spoken_to, short=titled):
                continue
            if titled and self._vocative(text, matches, folded, small, i):
                continue
            if titled and not starts and not self._after_noun_marker(folded, i):
                return GateDecision(True, f"name {raw!r}")
            sentence.content.append(raw)
        said = sentence.states(self, text[matches[-1].end() :])
        if said is not None:
            return GateDecision(True, f"content {said!r}")
        discounted = discounted or sentence.why
        if previous is not None:
            replied = self._replies(text, previous, answer=answer, auxiliary=auxiliary, echo=echo)
            if replied:
                return GateDecision(True, replied)
        return GateDecision(False, f"small talk ({discounted})" if discounted else "small talk")

    def passes(self, text: str, *, names: Iterable[str] = (), previous: str | None = None) -> bool:
        """``decide(...).passes``: True when the utterance should go to the model."""
        return self.decide(text, names=names, previous=previous).passes

    # ------------------------------------------------------------------------------------------------ helpers

    def _phrase_cover(self, words: list[str]) -> tuple[set[int], bool]:
        """Positions of the words that belong to a small-talk phrase (longest match first, left to right), and
        whether one of the phrases is an echo ("me too")."""
        covered: set[int] = set()
        echo = False
        i = 0
        while i < len(words):
            for phrase in self.phrases.get(words[i], ()):
                if tuple(words[i : i + len(phrase)]) == phrase:
                    covered.update(range(i, i + len(phrase)))
                    echo = echo or phrase in self.echoes
                    i += len(phrase)
                    break
            else:
                i += 1
        return covered, echo

    def _vocative(
        self, text: str, matches: list[re.Match[str]], words: list[str], small: set[int], i: int
    ) -> bool:
        """A capitalised word closing an address, right after a small-talk word ("Thanks, Mel!", "Hey Caro,") or
        after a comma that follows a function word ("Good to see you, Caroline!"; "I met Anna!" names someone)."""
        if i == 0:
            return False
        before = words[i - 1]
        gap = text[matches[i - 1].end() : matches[i].start()]
        after_small_talk = i - 1 in small or before in self.phatic or bool(_NOISE.fullmatch(before))
        if not (after_small_talk or (before in self.function and "," in gap)):
            return False
        return bool(_VOCATIVE_GAP.fullmatch(gap)) and bool(_VOCATIVE_END.match(text, matches[i].end()))

    def _after_noun_marker(self, words: list[str], i: int) -> bool:
        """One of the two words before is a German article or determiner: the capital marks a noun, not a name."""
        return any(w in self.noun_markers for w in words[max(0, i - 2) : i])

    def _asks_yes_or_no(self, previous: str) -> bool:
        """The last question of the turn before asks for a yes or a no ("Ever been to one?", "Did you go?"), not for
        more ("How are you?", "What about you?"): its first real word is no question word."""
        if "?" not in previous:
            return False
        question = previous[: previous.rindex("?")]
        start = max(question.rfind(c) for c in ".!?…\n¿")
        for word in (fold(w) for w in _WORD.findall(_expand_contractions(question[start + 1 :]))):
            if word in self.openers or word in self.phatic or _NOISE.fullmatch(word):
                continue
            return word not in self.question_words
        return False

    def _replies(self, text: str, previous: str, *, answer: bool, auxiliary: bool, echo: bool) -> str:
        """Why a reply without content of its own states a fact with the turn before ("" when it does not): a yes
        or no, or a pronoun and an auxiliary, answering a question ("Ever been to one?" "Nope, never.", "Did you
        go?" "I did!"), or an echo of what the other person said of themselves ("I'm vegan." "Me too!")."""
        if (answer or (auxiliary and "?" not in text)) and self._asks_yes_or_no(previous):
            return "answers a question"
        if echo and self.passes(previous):
            return "agrees with what was said"
        return ""


def _expand_contractions(text: str) -> str:
    """English negative contractions as two words ("can't" -> "can not", "won't" -> "will not")."""

    def expand(match: re.Match[str]) -> str:
        stem = match.group(1)
        return {"wo": "will", "ca": "can", "sha": "shall", "ai": "is"}.get(stem.lower(), stem) + " not"

    return _CONTRACTION.sub(expand, text)


def _known(word: str, lists: frozenset[str]) -> str:
    """A drawn-out word back to its listed form ("sooo" -> "so", "thanksss" -> "thanks", "coool" -> "cool")."""
    if word in lists or not _REPEAT.search(word):
        return word
    for repeat in (r"\1", r"\1\1"):
        shorter = _REPEAT.sub(repeat, word)
        if shorter in lists:
            return shorter
    return word


def _sentence_start(text: str, matches: list[re.Match[str]], i: int) -> bool:
    """The i-th word opens a sentence (or a quotation, or follows an emoji): a capital there marks no name."""
    return i == 0 or _breaks(text[matches[i - 1].end() : matches[i].start()], _SENTENCE_END)


def _breaks(gap: str, marks: re.Pattern[str]) -> bool:
    """The text between two words ends a sentence: a mark, or an emoji or other symbol ("Thanks 😊 See you")."""
    return bool(marks.search(gap)) or any(unicodedata.category(c) == "So" for c in gap)


@lru_cache(maxsize=256)
def _name_parts_cached(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(fold(part) for name in names for part in _WORD.findall(name) if len(part) > 1)


def _name_parts(names: Iterable[str]) -> frozenset[str]:
    return _name_parts_cached(tuple(sorted(set(names))))


def _is_name(word: str, names: frozenset[str], *, short: bool) -> bool:
    """The word is one of the names, or (``short``: written with a capital) a short form of one ("Mel" for
    "Melanie"; a lower-case "car" is no short form of "Caroline")."""
    return word in names or (short and len(word) >= 3 and any(name.startswith(word) for name in names))


#: The gate with the built-in lists, shared (it keeps no state between calls).
GATE: Final = SmallTalkGate()


def states_fact(text: str, *, names: Iterable[str] = (), previous: str | None = None) -> bool:
    """Whether ``text`` may state a fact and so goes to the model (see the module docstring)."""
    return GATE.passes(text, names=names, previous=previous)
