"""Contentless messages: acknowledgements, greetings, laughter ("Noted.", "Great, thanks.",
"haha", "ok", "👍"). They carry nothing to recall, so the compiler neither indexes their
neighbours' words with them (which would let them match questions about those neighbours) nor
gives them a turn's full confidence.

A message is contentless when every word in it is a filler word or laughter, in any of the
languages listed; a message with any other word (a name, a place, "vegan") carries content,
however short. Text of scripts without spaces (CJK) is matched as a whole.
"""

from __future__ import annotations

import re
import unicodedata

# Acknowledgements, greetings, thanks, agreement and interjections; English first, then the
# same small words in other common languages. Lowercase, accents kept.
_FILLER_TEXT = """
    ok okay okey k kk oki okie alright allright right sure yes yeah yep yup ya yea no nope nah
    noted got it gotcha understood roger fine good great cool nice neat awesome amazing
    wonderful perfect excellent lovely sweet brilliant fantastic wow whoa oh ah aha ahh ooh
    hmm hm um uh mhm uh-huh thanks thank you thx ty much many very so too lot lots really
    indeed totally absolutely definitely exactly agreed agree true same welcome hi hello hey
    hiya yo howdy morning evening afternoon night bye goodbye cya later see soon take care
    now cheers congrats congratulations the a and that's thats sounds sound is it's its glad
    to hear for me i am i'm you're youre what how are doing
    merci oui non d'accord bien super bonjour salut coucou génial
    danke ja nein gut genau hallo tschüss prima
    gracias sí si vale bueno hola adiós genial claro
    grazie ciao bene certo perfetto obrigado obrigada sim olá tchau
    спасибо да нет хорошо ок ладно понятно привет пока отлично
    شكرا نعم لا حسنا مرحبا
"""
FILLER_WORDS = frozenset(_FILLER_TEXT.split())
# Whole messages in scripts written without spaces.
FILLER_PHRASES = frozenset(
    {
        "好的",
        "好",
        "谢谢",
        "谢谢你",
        "嗯",
        "对",
        "是的",
        "你好",
        "再见",
        "哈哈",
        "没问题",
        "はい",
        "ありがとう",
        "ありがとうございます",
        "了解",
        "うん",
        "そうですね",
        "こんにちは",
        "네",
        "감사합니다",
        "고마워",
        "안녕",
    }
)
# haha, hehe, lol, lmao, xD, jaja, the Cyrillic kha-a, 哈哈, www and 草 (Japanese).
_LAUGHTER = re.compile(
    r"^(?:(?:h[aeiou])+h?|l+o+l+|lmao|rofl|x+d+|j[aeiou](?:j[aeiou])+"
    r"|\u0445\u0430(?:\u0445\u0430)+|哈+|w+|草)$"
)
_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")


def is_contentless(text: str) -> bool:
    """True when ``text`` has no word beyond filler, laughter, emoji and punctuation."""
    norm = _norm(text).strip()
    words = _WORD.findall(norm)
    if not words:
        return True  # only emoji, symbols or punctuation
    for w in words:
        if w in FILLER_WORDS or w in FILLER_PHRASES or _LAUGHTER.match(w):
            continue
        return False
    return True
