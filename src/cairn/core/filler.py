# ruff: noqa: RUF001, RUF003 -- filler words in many scripts
"""Contentless messages: acknowledgements, greetings, laughter ("Noted.", "Great, thanks.",
"haha", "ok", "👍"). They carry nothing to recall, so the compiler neither indexes their
neighbours' words with them (which would let them match questions about those neighbours) nor
gives them a turn's full confidence.

A message is contentless when every word in it is a filler word or laughter, in any of the
languages listed; a message with any other word (a name, a place, "vegan") carries content,
however short. Text of scripts without spaces (CJK) is matched as a whole, or is filler when
every character of it is a filler character (laughter, interjections, particles).
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
    ouais nan ok beaucoup top parfait bravo félicitations bonsoir bonne nuit soirée journée à
    plus tard bientôt demain bisous bah ben euh hein mdr vraiment trop carrément exactement
    grave moi aussi toi c'est ça clair évidemment
    danke ja nein gut genau hallo tschüss prima
    jo jep jup nö nee doch klar logo stimmt richtig gerne gern bitte dankeschön schön toll
    klasse krass perfekt spitze wahnsinn moin servus tschüs bis bald dann später gleich gute
    guten nacht tag abend ach na echt wirklich sicher alles mir auch dir du ich vielen
    gracias sí si vale bueno hola adiós genial claro
    muchas mil perfecto buena buenas buenos días noches tardes chao chau nos vemos luego
    pronto mañana hasta qué guay súper felicidades enhorabuena exacto cierto de acuerdo
    también yo igual uf vaya venga dale
    grazie ciao bene certo perfetto obrigado obrigada sim olá tchau
    sì buongiorno buonasera buonanotte notte dopo presto domani benissimo ottimo fantastico
    brava complimenti auguri esatto davvero anch'io io anche boh dai
    valeu beleza legal ótimo perfeito bom boa dia noite tarde oi até logo mais amanhã
    parabéns exato verdade também eu kkk rs
    спасибо да нет хорошо ок ладно понятно привет пока отлично
    окей ага угу не пожалуйста ясно здравствуй здравствуйте доброе утро добрый вечер день
    спокойной ночи до завтра встречи скорого связи супер класс круто классно здорово ого вау
    ух ах ох эх ну тоже я и ты конечно точно именно согласен согласна поздравляю лол
    شكرا نعم لا حسنا مرحبا
    شكراً تمام ماشي اوكي اه ايوه أيوه اكيد أكيد طبعا طبعاً يلا باي سلام أهلا اهلا هلا صباح
    الخير مسا مساء تصبح تصبحي على خير وانت وانتِ من أهله اهله حلو رائع ممتاز برافو مبروك
    يسلمو
    جزيلا مشكور مشكورة تسلم تسلمي يعطيك العافية طيب أوكي اوكي إي اي ايه إيه
    أيوا ايوا والله فعلا صح صحيح اكيد بالتأكيد نشوفك منشوفك بشوفك أشوفك اشوفك
    نشوفكم نتقابل نلتقي قريبا بعدين لاحقا نحكي منحكي بنحكي نتكلم وداعا مع السلامة المهم
    عموما كتير كثير جدا السلام عليكم وعليكم كيفك كيف حالك الحمد لله الحمدلله بخير أهلين
    اهلين مرحبتين واو يا سلام إن ان شاء الله
    네 예 응 어 아 오 와 우와 헐 하이 안녕 안녕하세요 안녕히 잘가 잘가요 잘자 잘자요 또 봐 봐요
    나중에 다음에 그래 그래요 그럼 알겠어 알겠어요 알겠습니다
    알았어 오케이 고마워 고마워요 감사 감사해요 감사합니다 맞아 맞아요 그니까 그러니까 진짜
    정말 대박 멋있다 최고 축하해 축하해요
    tamam peki olur evet hayır yok teşekkürler teşekkür ederim ederiz sağ ol olun sağol
    merhaba selam günaydın iyi geceler akşamlar günler görüşürüz hoşça kal harika süper çok
    güzel aynen kesinlikle anladım tabii tabi elbette rica bye eyvallah
    cảm ơn bạn nhé nha vâng dạ ừ ừm được rồi ok xin chào tạm biệt hẹn gặp lại tuyệt quá hay
    ευχαριστώ ευχαριστούμε πολύ ναι όχι εντάξει οκ γεια σου σας καλημέρα καληνύχτα καλησπέρα
    τέλεια ωραία σωστά φυσικά μπράβο τα λέμε αντίο
    תודה רבה כן לא בסדר אוקיי שלום היי בוקר טוב לילה ערב יופי מעולה אחלה סבבה נכון ברור
    להתראות ביי מזל
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
        "早",
        "早啊",
        "早安",
        "早上好",
        "晚安",
        "晚上好",
        "拜拜",
        "回头见",
        "明天见",
        "谢啦",
        "多谢",
        "没事",
        "没错",
        "当然",
        "收到",
        "知道了",
        "明白",
        "明白了",
        "恭喜",
        "恭喜恭喜",
        "太好了",
        "太棒了",
        "加油",
        "おはよう",
        "おやすみ",
        "おやすみなさい",
        "またね",
        "じゃあね",
        "ばいばい",
        "ありがと",
        "どうも",
        "りょうかい",
        "わかった",
        "わかりました",
        "なるほど",
        "そうだね",
        "そうなんだ",
        "いいね",
        "すごい",
        "すごいね",
        "おめでとう",
        "よかった",
        "よかったね",
        "ほんと",
        "まじ",
        "えー",
        "へー",
        "うんうん",
        "はいはい",
        "笑",
        # Thai (the polite particles ครับ / ค่ะ / คะ / นะ written on), Hindi: whole messages,
        # matched without spaces and punctuation (their words carry marks _WORD splits at).
        "ขอบคุณ",
        "ขอบคุณครับ",
        "ขอบคุณค่ะ",
        "ขอบคุณมาก",
        "ขอบคุณมากครับ",
        "ขอบคุณมากค่ะ",
        "โอเค",
        "โอเคครับ",
        "โอเคค่ะ",
        "ครับ",
        "ค่ะ",
        "คะ",
        "ได้ครับ",
        "ได้ค่ะ",
        "ได้เลย",
        "สวัสดี",
        "สวัสดีครับ",
        "สวัสดีค่ะ",
        "บาย",
        "เยี่ยม",
        "เยี่ยมเลย",
        "ใช่",
        "ใช่ครับ",
        "ใช่ค่ะ",
        "धन्यवाद",
        "शुक्रिया",
        "ठीक",
        "ठीकहै",
        "हाँ",
        "हां",
        "जी",
        "हाँजी",
        "जीहाँ",
        "नमस्ते",
        "अच्छा",
        "ओके",
        "बढ़िया",
        "बहुतबढ़िया",
        "बहुतधन्यवाद",
        "फिरमिलेंगे",
    }
)
# Characters that make a message of an unspaced script filler when it has no other:
# laughter, interjections, agreement and sentence-final particles (好好好, 嗯嗯, 哈哈哈).
FILLER_CHARACTERS = frozenset("哈嘿嘻呵嗯哦噢喔啊呀啦哇耶好的对是吧呢嘛了行嗨拜谢哎唉嘞哟")
# haha, hehe, lol, lmao, xD, jaja, the Cyrillic kha-a, 哈哈, www and 草 (Japanese), ههه, ㅋㅋ/ㅎㅎ,
# 555 (Thai).
_LAUGHTER = re.compile(
    r"^(?:(?:h[aeiou])+h?|l+o+l+|lmao|rofl|x+d+|j[aeiou](?:j[aeiou])+"
    r"|\u0445\u0430(?:\u0445\u0430)+|\u0430?(?:\u0445\u0430)+\u0445?|哈+|w+|草|\u0647{3,}"
    r"|[\u110f\u1112\u314b\u314e]{2,}|5{3,})$"  # (555: Thai "hahaha")
)
_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")


def _spelled(norm: str) -> str:
    """Letters, marks and digits alone (no spaces, punctuation, symbols or emoji)."""
    return "".join(c for c in norm if unicodedata.category(c)[0] in "LMN")


_PHRASES = frozenset(_spelled(_norm(p)) for p in FILLER_PHRASES)
# Longer messages are no whole filler phrase (with its punctuation and emoji): not spelled out.
_PHRASE_SPAN = 4 * max(map(len, _PHRASES))


def is_contentless(text: str) -> bool:
    """True when ``text`` has no word beyond filler, laughter, emoji and punctuation."""
    norm = _norm(text).strip()
    words = _WORD.findall(norm)
    if not words:
        return True  # only emoji, symbols or punctuation
    if len(norm) <= _PHRASE_SPAN and _spelled(norm) in _PHRASES:
        return True
    for w in words:
        if w in FILLER_WORDS or w in FILLER_PHRASES or _LAUGHTER.match(w):
            continue
        if all(c in FILLER_CHARACTERS for c in w):
            continue
        return False
    return True


# A sentence ends at a run of full stops, exclamation or question marks (with closing quotes
# or brackets after it): Latin-style marks only before a space or the end, so "3.50",
# "example.com" and "p.m." end nothing; the marks of other scripts anywhere (NFKC has already
# made full-width ones ASCII).
_SENTENCE_END = re.compile(
    r"(?:[.!?\u2026]+(?=[\s\"'\u00bb\u201d\u2019)\]]|$)|[.!?\u2026]*[\u3002\u061f\u0964\u06d4\u0589]+)"
    r"[\"'\u00bb\u201d\u2019)\]]*"
)
_ASKS = frozenset("?\u061f")  # ? ؟ (？ is ? after NFKC)
_STATES = frozenset(".\u3002\u2026\u0964\u06d4\u0589")  # . 。 … । ۔ ։


def is_question(text: str) -> bool:
    """True when ``text`` only asks: its last sentence ends with a question mark (laughter or
    emoji may follow) and no sentence or line before it states something — ends with a full
    stop, or is a line of content with no mark ("Hey! How was Denmark?", "¿Y tu hermano?",
    "عملت محضر؟"). Greetings and exclamations before the question do not count as a
    statement; "We moved to Oslo. Want to visit?" states something, so it is no question."""
    norm = _norm(text).strip()
    ends = list(_SENTENCE_END.finditer(norm))
    if not ends or not set(ends[-1].group()) & _ASKS:
        return False
    if not is_contentless(norm[ends[-1].end() :]):
        return False  # words after the last mark: a sentence that does not ask
    if any(set(e.group()) & _STATES and not set(e.group()) & _ASKS for e in ends[:-1]):
        return False
    lines = [line.strip() for line in norm[: ends[-1].start()].split("\n")]
    return not any(
        line and not _SENTENCE_END.search(line[-1:] + " ") and not is_contentless(line)
        for line in lines[:-1]
    )
