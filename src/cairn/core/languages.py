# ruff: noqa: RUF001, RUF002, RUF003 -- word lists in many scripts
"""Function words of the languages whose queries Cairn cleans.

Search terms come from ``cairn.core.analysis``; a query keeps only the words that carry its
content. Words are listed as ``analysis.fold`` leaves them (case folded, accents removed,
Cyrillic ``ё`` as ``е``, Arabic hamza and vowel marks dropped).

- **English, Russian and Arabic** function and question words (``какой``, ``почему``;
  ``شو``, ``وين``, ``ليش``) are dropped from every query: the scripts never collide.
- **Spanish, German, French, Italian, Portuguese and Dutch** function words are dropped from a
  query whose own function words name that language more often than English's do
  (``latin_stop_words``): ``¿De qué delito fue víctima Iñaki?`` asks for ``delito victima
  inaki``, not for the ``fue`` of ``¿Jon se fue bien?``. (Measured and not kept in session 5,
  when the vector lane was English-only and those words were a paraphrase's only overlap;
  kept once the multilingual model carried paraphrases: docs/benchmarks.md, "Latin-script
  function words, session 8". Snowball stemming of these languages stays out.)
- **Chinese and Japanese** are written without spaces: question words and particles are cut out
  of a query's runs of characters before the runs become bigrams (``cjk_pieces``), so
  ``李娜不能吃哪些海鲜`` asks for ``李娜不能吃`` and ``海鲜``, not for the bigram ``哪些`` that
  every question shares. Japanese runs are also cut where the script changes: hiragana carries
  the grammar (particles, verb endings), kanji and katakana the content, so ``美咲は今どこで
  働いていますか`` asks for ``美咲``, ``今`` and ``働``. A content piece's Han characters are
  terms of their own too (``content_characters``): a Chinese or Japanese word is often one
  character (``猫``, ``犬``), which a bigram never matches.
"""

from __future__ import annotations

import regex


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ENGLISH = _words(
    """a about above after again against all also am an and any are aren't as at be because
    been before being below between both but by can can't cannot could couldn't d did didn't do
    does doesn't doing don't down during each ever few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself just kind let's likely ll m
    may me might more most must mustn't my myself no nor not of off on once only or other ought
    our ours ourselves out over own re really s same shall shan't she she'd she'll she's should
    shouldn't so some sort such t than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until up
    ve very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's will with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves"""
)
RUSSIAN = _words(
    """а без бы был была были было быть в вам вас вот все всё вы где да для до его ее её если
    есть еще ещё же за зачем и из или им их к как какая какие каким каких какое какой каком
    какому какую кем когда кого кому ком кто куда ли меня мне мной мы на над нам нас не нет
    ни но о об он она они оно от откуда по под почему при про с сколько со так там тебе тебя
    то тоже только ты у уж уже чего чей чем чему что чтобы чье чьи чья чём это эта эти этот
    я""".replace("ё", "е")
)
# Modern Standard Arabic and common Levantine question and function words, then the question
# words and possessive particles (English "what", "how", "of") of Egyptian, Gulf, Iraqi and
# Maghrebi Arabic. Left out where a word is also a content word elsewhere: Levantine ``تبع``
# ("of") is MSA "followed", Egyptian ``انهي`` ("which") is "I finish".
ARABIC = _words(
    """في من على الى الي عن مع هذا هذه ذلك تلك التي الذي الذين هو هي هم انا انت نحن ما ماذا
    لماذا متى اين كم لا لم لن كان كانت يكون ان او ثم قد لقد كل بعض عند لدى حتى اين كيف هل و
    اي اية شو وين ليش ايمتى امتى مين قديش اديش اللي عم رح راح كمان بس شي هيك هاد
    هاي مش لسا
    ايه ازاي فين ليه كام بتاع بتاعة بتاعت بتاعي بتاعك بتاعه بتاعها بتاعته بتاعتها
    وش ايش شنو منو شلون شكد شكثر علاش كيفاش شكون فوقاش واش"""
)
# Ukrainian function and question words (Cyrillic, beside Russian's; ``ї`` is folded to ``і``).
UKRAINIAN = _words(
    """і й та але або що як де коли хто чому навіщо куди звідки скільки чи не ні це цей ця ці
    той ті він вона воно вони я ти ми ви мене мені тебе тобі його іі іх ім нас вас у в з із
    зі до від для на по під про за над при через без між же ж би бо теж також ще вже лише
    тільки навіть тут там який яка яке які якого якоі якому яких якій своє свій своя своі"""
)
# Hebrew function and question words (as written, before the particle letters come off).
HEBREW = _words(
    """של את זה זו זאת הוא היא הם הן אני אתה את אנחנו אתם אתן מה מי איפה מאיפה לאן מתי למה
    מדוע איך כמה איזה איזו אילו האם אם על עם אל גם כל לא כן יש אין היה הייתה היו שלי שלך
    שלו שלה שלנו שלכם שלהם שלהן כי אבל או רק עוד כבר כדי לי לך לו לה לנו להם אותו אותה
    אותי אותם בו בה בהם ממנו ממנה עליו עליה"""
)
# Hindi postpositions, pronouns, auxiliaries and question words (Devanagari).
HINDI = _words(
    """का की के को में से पर ने है हैं था थी थे हो और या भी तो ही यह वह ये वो क्या कौन कौनसा
    कौनसी कहाँ कहां कब क्यों कैसे कैसा कैसी कितना कितनी कितने किस किसने किसको किसे सी सा
    एक नहीं ना मैं मेरा मेरी मेरे तुम तुम्हारा तुम्हारी आप आपका आपकी आपके उसका उसकी उसके
    उनका उनकी उनके इस उस इसका इसकी अपना अपनी अपने रहा रही रहे गया गई गए हुआ हुई हुए
    जो जब तक लिए वाला वाली वाले"""
)
# Persian function and question words (Arabic script with Persian letters; ``آ`` is ``ا``).
PERSIAN = _words(
    """و در به از که این ان را رو با برای تا یا هم اما ولی چه چی چیه چرا کجا کجاست کی کدام
    چند چندم چطور چگونه ایا است هست نیست بود می نمی من تو او ما شما انها ایشان خود
    یک هر همه اون این ها های ای"""
)
# Greek articles, pronouns, prepositions, particles and question words (accents removed, final
# sigma as ``σ``, as ``fold`` leaves them; not ``ποσο``, "how much", which is then ``ποσό``,
# "amount").
GREEK = _words(
    """ο η το οι τα του τησ των τον την τη τισ τουσ στο στη στην στον στα στισ στουσ σε με για
    απο και κι αλλα ομωσ που τι ποιοσ ποια ποιο ποιοι ποιεσ ποιον ποιασ ποιου ποιων ποτε
    πωσ γιατι οταν ειναι ηταν ειμαι εισαι ειμαστε ειστε
    θα να δεν μην μη ενα ενασ μια ενοσ μιασ εγω εσυ αυτοσ αυτη αυτο αυτοι αυτα
    αυτον αυτην αυτου αυτησ μου σου μασ σασ τουσ οτι αν ωσ επισησ πια ηδη ακομα ακομη εδω
    εκει ολα ολοι ολεσ καθε πουθενα"""
)
# The words of these scripts never collide, so one set serves all (Ukrainian's and Russian's
# share a script but not their function words).
STOP_WORDS = ENGLISH | RUSSIAN | ARABIC | UKRAINIAN | HEBREW | HINDI | PERSIAN | GREEK

# Function and question words of languages written in Latin script like English. Their words
# collide with English and with each other (``die``, ``war``, ``son``, ``fur``), so a list
# applies only to a query whose own function words name its language (``latin_stop_words``).
LATIN = {
    "es": _words(
        """a al algo alguien algun alguna algunas alguno algunos ante antes aqui asi aun cada
        como con contra cual cuales cualquier cuando cuanta cuantas cuanto cuantos de del desde
        donde el ella ellas ello ellos en entre era eran eres es esa esas ese eso esos esta
        estaba estaban estado estan estar estas este esto estos estoy fue fueron fui ha habia
        han has hasta hay he la las le les lo los me mi mis muy ni no nos nosotros o os otra
        otras otro otros para pero por porque que quien quienes se ser si sin sobre son su sus
        tambien te ti tu tus un una unas uno unos usted ustedes y ya yo"""
    ),
    "de": _words(
        """aber alle allem allen aller alles als am an andere anderen auch auf aus bei beim bin
        bis bist da damit dann das dass dein deine deinem deinen deiner dem den denn der des
        dich die dies diese diesem diesen dieser dieses dir doch dort du durch ein eine einem
        einen einer eines er es euch euer eure fur gegen gewesen hab habe haben hat hatte
        hatten ich ihm ihn ihnen ihr ihre ihrem ihren ihrer im in ist ja jede jedem jeden jeder
        jedes kann kein keine keinem keinen man mich mir mit muss nach nicht noch nur ob oder
        ohne sein seine seinem seinen seiner sich sie sind so soll sondern uber um und uns
        unser unsere unter vom von vor war waren was weil welche welchem welchen welcher
        welches wem wen wenn wer werde werden wie wieso wir wird wo wofur woher wohin womit
        worauf woruber wovon wovor wozu wurde wurden zu zum zur"""
    ),
    "fr": _words(
        """a ai as au aux avait avec avez avoir avons ce ceci cela celle celui ces cet cette
        chez comme comment dans de des du elle elles en es est et etaient etait ete etre eu
        il ils je la le les leur leurs lui ma mais me mes moi mon ne nos notre nous on ont ou
        par pas pour pourquoi qu quand que quel quelle quelles quels qui quoi sa sans se ses
        si son sont sur ta te tes toi ton tu un une vos votre vous y"""
    ),
    "it": _words(
        """a ad agli ai al alla alle anche che chi ci come con cosa cui da dal dalla dei del
        della delle dello di dove e ed era erano gli ha hai hanno ho i il in io la le lei li
        lo loro lui ma mi mia mio ne nei nel nella noi non o per perche piu quale quali quando
        quanto quella quello questa questo se si sono su sua sue suo suoi sul sulla ti tra tu
        tua tuo un una uno vi voi"""
    ),
    "pt": _words(
        """a ao aos as com como da das de do dos e ela elas ele eles em entre era esse essa
        esta este eu foi ha isso isto ja mais mas me meu minha muito na nao nas no nos o onde
        os ou para pela pelo por qual quando que quem se sem seu sua sao ser sobre tem teu tu
        um uma voce"""
    ),
    "nl": _words(
        """aan al als bij dan dat de die dit door een en er geen had heb hebben heeft hem het
        hij hoe hun ik in is je kan maar me met mij mijn na naar niet nog of om ook op over te
        tot uit van voor waar waarom wanneer was wat we wel werd wie wij wil worden zal ze zich
        zij zijn zou"""
    ),
}

# Chinese question words, pronouns and particles cut out of a query's runs (longest first).
CHINESE = _words(
    """为什么 怎么样 是不是 有没有 什么 哪里 哪儿 哪个 哪些 哪家 哪种 哪位 哪天 哪年 哪门 哪一
    怎么 怎样 如何 多少 是否 何时 我们 你们 他们 她们 吗 呢 吧 的 谁 哪 几"""
)
# Japanese question words written in kanji (the rest of a question's grammar is hiragana).
JAPANESE = frozenset({"何", "誰"})

# Characters too common to be a query term on their own (a single character of a Chinese or
# Japanese query is one when it is not one of these: ``猫`` finds ``一只猫``).
FUNCTION_CHARACTERS = frozenset(
    "的了是在有和与也都就还又很吗呢吧啊么个这那哪什谁几我你他她它们不没要会能对把被给从到说去来"
    "上下里中为以之而于其或及等想做让一二两"
)

_KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}]")
_ASCII_WORD = regex.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
_HAN = regex.compile(r"\p{Han}")
# A run of one script: hiragana (grammar, dropped), or kanji/katakana (content), with the
# marks that belong to either (long vowel ー, iteration 々).
_JA_PIECE = regex.compile(r"(?P<hira>\p{Hiragana}+)|(?P<other>[^\p{Hiragana}]+)")
_ZH_CUT = regex.compile("|".join(map(regex.escape, sorted(CHINESE, key=len, reverse=True))))


def latin_stop_words(words: list[str]) -> frozenset[str]:
    """The function words of the Latin-script language that ``words`` (a query's, folded) are
    written in: the ``LATIN`` lists that hold more of them than English does (and the most of
    them; every list tied at the most), else none. So ``¿Dónde trabaja Nerea?`` drops
    ``donde``, while an English question keeps ``son`` and ``die`` and a Spanish name in one
    (``María de la Cruz``) leaves it English."""
    english = sum(w in ENGLISH for w in words)
    counts = {lang: sum(w in listed for w in words) for lang, listed in LATIN.items()}
    best = max(counts.values(), default=0)
    if best == 0 or best <= english:
        return frozenset()
    return frozenset().union(*(LATIN[lang] for lang, n in counts.items() if n == best))


def english_text(text: str) -> bool:
    """Whether ``text`` reads as English: every letter ASCII (digits, punctuation and emoji may
    be anything) and no other Latin-script language's function words outnumbering English's
    (``latin_stop_words``), so ``Waar werkt Femke nu?`` and ``Dove lavora Chiara adesso?`` are
    not English though every letter of them is ASCII."""
    if not all(ch.isascii() for ch in text if ch.isalpha()):
        return False
    words = _ASCII_WORD.findall(text.lower())
    return not latin_stop_words([p for w in words for p in w.split("'") if p])


def is_japanese(text: str) -> bool:
    """Whether ``text`` has kana (Chinese has none)."""
    return _KANA.search(text) is not None


def cjk_pieces(run: str, japanese: bool) -> list[str]:
    """The content pieces of a run of unspaced script in a query: Chinese runs cut at
    ``CHINESE`` words; Japanese runs cut where the script changes, hiragana pieces and
    ``JAPANESE`` words dropped. Empty when nothing is left (the caller then keeps the run)."""
    if japanese:
        pieces = [m.group() for m in _JA_PIECE.finditer(run) if m.lastgroup == "other"]
        return [p for p in pieces if p not in JAPANESE]
    return [p for p in _ZH_CUT.split(run) if p]


def content_characters(piece: str) -> list[str]:
    """The characters of a query's content piece that are terms on their own: Han characters
    (a Chinese or Japanese word is often one) that are not ``FUNCTION_CHARACTERS``; kana and
    Hangul are sounds, not words."""
    return [c for c in piece if _HAN.match(c) and c not in FUNCTION_CHARACTERS]
