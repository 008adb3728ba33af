# ruff: noqa: RUF001 -- messages in many scripts
"""Contentless messages: filler, greetings and laughter in several scripts, and short messages
that still carry content."""

from __future__ import annotations

import pytest

from cairn.core.filler import is_contentless, is_question


@pytest.mark.parametrize(
    "text",
    [
        "Noted.",
        "Great, thanks.",
        "haha",
        "Hahaha!!",
        "ok",
        "OK 👍",
        "👍😂",
        "...",
        "Thank you so much!",
        "Hey, how are you?",
        "Bye for now!",
        "好的",
        "谢谢",
        "哈哈哈",
        "ありがとう",
        "Спасибо!",
        "\u0445\u0430\u0445\u0430",
        "Merci, génial !",
        "Gracias, adiós",
        "شكرا",
        # Chat filler of more languages: goodbyes, agreement, laughter, particles.
        "Bis dann!",
        "Perfekt, gute Nacht",
        "Ouais, à plus tard !",
        "Vale, nos vemos mañana",
        "Ciao, a domani!",
        "Valeu, até amanhã",
        "Ладно, спокойной ночи",
        "ахахах",
        "تمام، يلا باي",
        "هههه",
        "好好好",
        "嗯嗯",
        "晚安",
        "おやすみ！",
        # Arabic and Korean counterparts of the English list: see you soon, talk later,
        # anyway, by God yes, God willing, goodbye, oh cool, lol right.
        "منشوفك قريباً",
        "كتير. المهم، منحكي بعدين",
        "إي والله",
        "إن شاء الله",
        "مع السلامة",
        "오 멋있다",
        "ㅋㅋ 그니까",
        "ㅎㅎㅎ",
        "응, 또 봐요",
    ],
)
def test_filler_is_contentless(text: str) -> None:
    assert is_contentless(text)


@pytest.mark.parametrize(
    "text",
    [
        "Lisbon!",
        "I'm vegan.",
        "Yes, Melanie.",
        "I work at Acme.",
        "Congrats on the new job!",
        "我住在北京",
        "東京に住んでいます",
        "Я живу в Москве",
        "Ich wohne in München",
        "e\u0301te\u0301 a\u0300 Gene\u0300ve",
        "أعيش في القاهرة",
        "ok, my dog is called Rex 🐶",
        "Bis dann in Freiburg!",
        "好的，我养了一只猫",
        "Спокойной ночи, Маша",
        "おやすみ、ビスケ",
        "منشوفك بالقاهرة بكرا",
        "صرت الشيف الرئيسي",
        "ㅋㅋ 귀엽다",
        # Words that are filler in one sense and content in another stay content:
        # "dinner sounds good", "I like mornings", "it's over", the name al-Nour.
        "저녁 좋아요",
        "아침 좋아",
        "خلاص",
        "النور",
        "서연아 좋은 아침! 잠깐 시간 돼?",
    ],
)
def test_a_message_with_any_other_word_has_content(text: str) -> None:
    assert not is_contentless(text)


@pytest.mark.parametrize(
    "text",
    [
        "How was Denmark?",
        "Hey! How was Denmark?",
        "Wait, you did WHAT??",
        "¿Y tu hermano?",
        "selam! radyo nasıl gidiyor?",
        "عملت محضر؟",
        "السلحفاة ولا كريم؟ 😂",
        "台湾好玩吗？",
        "Как дела у Саши?",
        "서연아 좋은 아침! 잠깐 시간 돼?",
        "Did you pay $3.50 for it?",  # a "." inside a word ends nothing
        "Have you tried example.com?",
        "Is it 5 p.m.?",
        "How was it? haha",  # laughter after the question
        "Hey\nHow was Denmark?",  # a greeting's line
    ],
)
def test_a_turn_that_only_asks_is_a_question(text: str) -> None:
    assert is_question(text)


@pytest.mark.parametrize(
    "text",
    [
        "We moved to Oslo. Want to visit?",  # states first
        "I went there. It was great!",
        "What? No way, I love it",  # ends in a statement
        "Wait... really?",  # an ellipsis ends a sentence
        "我住在北京。你呢？",
        "انتقلنا إلى القاهرة. هتيجي؟",
        "",
        "ok",
        "We moved to Oslo\nWant to visit?",  # a line that states, with no full stop
        "ہم لاہور چلے گئے۔ آؤ گے؟",  # Urdu's full stop
    ],
)
def test_a_turn_that_states_something_is_no_question(text: str) -> None:
    assert not is_question(text)


@pytest.mark.parametrize(
    "text",
    [
        "תודה רבה!",
        "סבבה",
        "धन्यवाद",
        "ठीक है",
        "ขอบคุณครับ",
        "โอเค",
        "555555",
        "Teşekkürler!",
        "Tamam",
        "Cảm ơn bạn!",
        "Ευχαριστώ!",
        "Εντάξει, τα λέμε!",
    ],
)
def test_filler_in_hebrew_hindi_thai_turkish_vietnamese_greek(text: str) -> None:
    assert is_contentless(text)


@pytest.mark.parametrize(
    "text",
    [
        "Tamam, yarın İzmir'e gidiyorum.",
        "ठीक है, मैं कल दिल्ली जा रहा हूँ",
        "ขอบคุณครับ พรุ่งนี้ผมจะไปเชียงใหม่",
        "תודה, עברתי לחיפה",
        "Cảm ơn, tôi sống ở Đà Nẵng",
    ],
)
def test_filler_words_beside_content_are_content(text: str) -> None:
    assert not is_contentless(text)
