# ruff: noqa: RUF001, RUF002 -- word lists in many scripts
"""Function words of the languages whose queries Cairn cleans.

Search terms come from ``cairn.core.analysis``; a query keeps only the words that carry its
content. Words are listed as ``analysis.fold`` leaves them (case folded, accents removed,
Cyrillic ``ё`` as ``е``, Arabic hamza and vowel marks dropped).

- **English, Russian and Arabic** function and question words (``какой``, ``почему``;
  ``شو``, ``وين``, ``ليش``) are dropped from every query: the scripts never collide.
  (German, French, Spanish … lists, applied when a query's function words named its language,
  and Snowball stemming of those languages were measured and not kept: docs/benchmarks.md,
  "Multilingual ranking (session 5)".)
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
# Modern Standard Arabic and common Levantine question and function words.
ARABIC = _words(
    """في من على الى الي عن مع هذا هذه ذلك تلك التي الذي الذين هو هي هم انا انت نحن ما ماذا
    لماذا متى اين كم لا لم لن كان كانت يكون ان او ثم قد لقد كل بعض عند لدى حتى اين كيف هل و
    اي اية شو وين ليش ايمتى امتى مين قديش اديش اللي عم رح راح كمان بس شي هيك هاد
    هاي مش لسا"""
)
# The words of these scripts never collide, so one set serves all.
STOP_WORDS = ENGLISH | RUSSIAN | ARABIC

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
_HAN = regex.compile(r"\p{Han}")
# A run of one script: hiragana (grammar, dropped), or kanji/katakana (content), with the
# marks that belong to either (long vowel ー, iteration 々).
_JA_PIECE = regex.compile(r"(?P<hira>\p{Hiragana}+)|(?P<other>[^\p{Hiragana}]+)")
_ZH_CUT = regex.compile("|".join(map(regex.escape, sorted(CHINESE, key=len, reverse=True))))


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
