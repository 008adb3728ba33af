# ruff: noqa: RUF001, RUF002, RUF003 -- text in many scripts is what these tests are about
"""``cairn.core.analysis``: hash keys and search terms for every script."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cairn.core.analysis import (
    content_digest,
    content_size,
    content_terms,
    fold,
    hash_key,
    index_terms,
    index_text,
    query_terms,
)
from cairn.core.arabic import light_stem
from cairn.core.hebrew import prefix_stem
from cairn.core.languages import STOP_WORDS

NFC_CAFE = unicodedata.normalize("NFC", "café")
NFD_CAFE = unicodedata.normalize("NFD", "café")


def test_texts_of_every_script_keep_distinct_hashes() -> None:
    texts = [
        "我住在北京",
        "我明天去上海",
        "東京に住んでいます",
        "大阪に住んでいます",
        "Я живу в Москве",
        "Я живу в Казани",
        "أعيش في القاهرة",
        "أعيش في دبي",
        "אני גר בירושלים",
        "मैं दिल्ली में रहता हूँ",
        "저는 서울에 살아요",
        "ฉันชอบกาแฟ",
        "Ich wohne in München",
        "J'habite à Genève",
        "I love 🍵",
        "I love ☕",
        "👨‍👩‍👧",
        "👨‍👩‍👦",
        "Really?",
        "Really.",
    ]
    digests = {content_digest(t) for t in texts}
    assert len(digests) == len(texts)


def test_hash_key_folds_case_width_compatibility_and_spacing_only() -> None:
    assert hash_key("  Hello   WORLD\n") == hash_key("hello world")
    assert hash_key("Ｔｅａ") == hash_key("tea")  # full-width (NFKC)
    assert hash_key("Straße") == hash_key("STRASSE")  # case folding
    assert hash_key("The dose is 10⁶ units.") != hash_key("The dose is 106 units.")
    assert hash_key("H₂O") != hash_key("H2O")  # superscripts and subscripts keep their form
    assert hash_key(unicodedata.normalize("NFD", "ᾳ x²")) == hash_key("ᾳ x²")
    assert hash_key(NFC_CAFE) == hash_key(NFD_CAFE)  # one word in two normal forms
    assert hash_key("café") != hash_key("cafe")  # an accent is part of the text
    assert hash_key("I like tea.") != hash_key("I like tea")  # so is punctuation


def test_a_slot_fact_hashes_its_start() -> None:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    assert content_digest("Ann works at Acme", at) != content_digest("Ann works at Acme")
    assert content_digest("Ann works at Acme", at) == content_digest("ann works at acme", at)


# Text from every plane that matters: letters of all scripts, marks, digits, symbols and
# emoji, punctuation and whitespace (NUL excluded: no backend stores it).
TEXTS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip())
SCRIPT_TEXTS = st.text(
    alphabet=st.sampled_from("aAéE\u0301 \u3000北京东東キャ한국Мосваقاهرة🍵👍🏽\u200d.!,ß"),
    min_size=1,
    max_size=12,
).filter(lambda s: s.strip())


def _folded(text: str) -> str:
    """NFKC + case folding + whitespace folding: the only equivalence hashes may have; but
    a superscript or subscript (Unicode's ``<super>``/``<sub>`` forms: ``⁶``, ``₂``, ``ª``)
    keeps its form, so ``10⁶`` is not ``106``."""
    out, run = [], []
    for c in unicodedata.normalize("NFC", text):
        if unicodedata.decomposition(c).startswith(("<super>", "<sub>")):
            out += [_nfkc_casefold("".join(run)), c]
            run = []
        else:
            run.append(c)
    out.append(_nfkc_casefold("".join(run)))
    return " ".join("".join(out).split())


def _nfkc_casefold(text: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


@settings(max_examples=400, deadline=None)
@given(TEXTS | SCRIPT_TEXTS, TEXTS | SCRIPT_TEXTS)
@example("A", "\u00aa")  # (ª is a superscript a: kept, not folded to a)
@example("10\u2076", "106")
def test_distinct_texts_get_distinct_hashes_unless_equal_after_folding(a: str, b: str) -> None:
    same = content_digest(a) == content_digest(b)
    assert same == (_folded(a) == _folded(b))


@settings(max_examples=200, deadline=None)
@given(TEXTS | SCRIPT_TEXTS)
def test_nfc_and_nfd_forms_hash_and_analyse_alike(text: str) -> None:
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert content_digest(nfc) == content_digest(nfd)
    assert index_terms(nfc) == index_terms(nfd)
    assert query_terms(nfc) == query_terms(nfd)


@settings(max_examples=200, deadline=None)
@given(TEXTS | SCRIPT_TEXTS)
def test_every_query_term_is_an_index_term_of_the_same_text(text: str) -> None:
    """Queries are cut as the index is: a text always finds itself."""
    indexed = set(index_terms(text))
    assert set(query_terms(text)) <= indexed
    assert all(term and " " not in term for term in indexed)


def test_cjk_is_cut_into_bigrams() -> None:
    assert "北京" in index_terms("我住在北京")
    # A query's bigrams first, then its content characters (a word may be one character;
    # "上" is too common to be a term alone).
    assert query_terms("北京") == ["北京", "北", "京"]
    assert query_terms("上海") == ["上海", "海"]
    assert "東京" in index_terms("東京に住んでいます")
    assert "서울" in index_terms("저는 서울에 살아요")
    assert "猫" in index_terms("我的猫很可爱")  # single characters are indexed too
    assert query_terms("猫") == ["猫"]


def test_accents_fold_but_letters_stay_apart() -> None:
    assert query_terms("Genève") == query_terms("geneve") == ["geneve"]
    assert query_terms("München") == ["munchen"]
    assert query_terms(NFC_CAFE) == query_terms(NFD_CAFE) == query_terms("CAFE") == ["cafe"]
    assert fold("Ærøskøbing") == "aeroskobing"
    assert fold("Ἀθῆναι") == "αθηναι"  # Greek accents and breathings
    assert fold("مُحَمَّد") == "محمد"  # Arabic vowel marks
    assert fold("が") == "が"  # a Japanese voiced kana is another letter: kept
    assert fold("हिंदी") == "हिंदी"  # Devanagari vowel signs: kept
    assert index_text("Москва, Россия!") == "москв росс"  # Russian is stemmed (Snowball)


def test_english_stop_words_and_apostrophes() -> None:
    assert query_terms("What is the name of Ann's puppy?") == ["name", "ann", "puppy"]
    assert query_terms("I don't know") == ["know"]
    assert query_terms("What did you do?") == ["what", "did", "you", "do"]  # nothing else left
    assert index_terms("Don't panic") == ["don", "t", "panic"]
    assert content_terms("The orchard's harvest in Москва 北京") == [
        "orchard",
        "harvest",
        "москв",
        "北京",
    ]


def test_russian_and_arabic_words_match_across_inflections() -> None:
    """Neither backend stems them, so the analysis does: a case ending or an attached
    article does not hide a word."""
    assert query_terms("Москве") == query_terms("Москвы") == query_terms("Москва") == ["москв"]
    assert set(query_terms("Где ты работаешь?")) <= set(index_terms("Я работаю врачом"))
    assert query_terms("القاهرة") == query_terms("بالقاهرة")
    assert query_terms("На чём ты играешь по выходным?") == ["игра", "выходн"]  # stop words
    assert fold("чай") == "чай" and fold("ёлка") == "елка"  # й is a letter; ё is searched as е


def test_symbols_and_emoji_separate_terms() -> None:
    assert index_terms("tea🍵time, 42%") == ["tea", "time", "42"]
    assert query_terms("🍵") == []


def test_russian_and_arabic_question_words_are_dropped() -> None:
    assert query_terms("Почему Дмитрий искал новую квартиру?") == [
        "дмитр",
        "иска",
        "нов",
        "квартир",
    ]
    assert query_terms("К какому забегу готовится Ольга?") == ["забег", "готов", "ольг"]
    assert query_terms("وين بتشتغل نور هلق؟") == ["بتشتغل", "نور", "هلق"]
    # Egyptian, Gulf and Maghrebi question words and possessive particles too.
    assert query_terms("الشركة الجديدة بتاعة ريم متخصصة في إيه؟") == [
        "شرك",
        "جديد",
        "ريم",
        "متخصص",
    ]
    assert query_terms("وش صار مع خالد؟") == query_terms("كيفاش صار خالد") == ["صار", "خالد"]


def test_hebrew_hindi_and_greek_words_are_stemmed_and_function_words_dropped() -> None:
    """Hebrew particles (``ה`` "the", ``ו`` "and", ``ב`` "in" …) and plural endings come off;
    Devanagari and Greek words get Snowball's Hindi and Greek; Ukrainian, Persian, Hebrew,
    Hindi and Greek function and question words are dropped from a query."""
    assert query_terms("מאיפה איתי אימץ את הכלב שלו?") == ["איתי", "אימצ", "כלב"]  # finals plain
    assert {prefix_stem(w) for w in ["כלב", "הכלב", "והכלבים", "לכלבים"]} == {"כלב"}
    assert set(query_terms("איפה הכלבים?")) <= set(index_terms("אימצתי כלב מעמותה"))
    assert query_terms("कबीर की बहन ईशा क्या और कहाँ पढ़ेगी?") == ["कबीर", "बहन", "ईश", "पढ़"]
    assert query_terms("कुत्तों") == query_terms("कुत्ता") == query_terms("कुत्ते")
    assert query_terms("Де зараз працює Тарас?") == ["зараз", "працює", "тарас"]
    assert query_terms("دن سگش را از کجا به فرزندی گرفت؟") == ["دن", "سگش", "فرزندی", "گرفت"]
    assert query_terms("Πού δουλεύει η Κλαίρη;") == ["δουλευ", "κλαιρ"]  # Snowball's Greek
    assert query_terms("σκύλος") == query_terms("σκύλων") == query_terms("ΣΚΥΛΙΆ")
    # Snowball's Greek takes all of "όταν" ("when"): a word is never stemmed to nothing.
    assert index_terms("όταν") == ["οταν"] and "" not in query_terms("Τι έγινε όταν ήρθε;")
    # Every listed function word is written as ``fold`` leaves it, or it could never match.
    assert all(fold(w) == w for w in STOP_WORDS)


def test_arabic_words_keep_their_stem_whatever_is_attached() -> None:
    """Light stemming (``cairn.core.arabic``): the article, ``و`` ("and") and the two
    together come off, so "balcony" is found as "the balcony"; Snowball's stemmer, used
    before, cut ``بلكونة`` to ``لكون`` and ``البلكونة`` to ``بلكون``."""
    for bare in ["بلكونة", "شقة", "ريحان", "مستشفى", "طرابزون"]:
        forms = [bare, "ال" + bare, "وال" + bare, "بال" + bare, "لل" + bare, "و" + bare]
        assert len({light_stem(fold(f)) for f in forms}) == 1, bare
    assert set(query_terms("شو مزروع على بلكونة ليلى؟")) & set(
        index_terms("البلكونة صغيرة بس البندورة والريحان صاروا طالعين")
    ) == {"بلكون"}
    assert light_stem("شقة") == "شق" and light_stem("ليلى") == "ليل"
    # Persian and Urdu words (letters Arabic does not use) are only normalized.
    assert light_stem("کتابها") == "کتابها" and light_stem("والیبال") == "والیبال"


def test_latin_script_function_words_drop_when_the_query_names_its_language() -> None:
    """German, Spanish, French … share the Latin script with English and with each other,
    so a list applies only when the query's own function words say which language it is."""
    assert query_terms("Ist das für Lena gefährlich?") == ["lena", "gefahrlich"]
    assert query_terms("¿De qué delito fue víctima Iñaki?") == ["delito", "victima", "inaki"]
    assert query_terms("Qu'est-ce qu'Élodie a acheté pour sa mère ?") == [
        "elodie",
        "achete",
        "mere",
    ]
    assert query_terms("Wo arbeitet Katrin jetzt?") == ["arbeitet", "katrin", "jetzt"]
    # English stays English: its own stop words outnumber the others', so German ``die``,
    # Spanish ``son`` and a name's ``de la`` remain terms.
    assert query_terms("Did her son die in the war?") == ["son", "die", "war"]
    assert query_terms("What did Maria de la Cruz say?") == ["maria", "de", "la", "cruz", "say"]
    assert query_terms("Where did the fur coat come from?") == ["fur", "coat", "come"]
    # Nothing but function words: the query keeps them rather than asking for nothing.
    assert query_terms("¿Qué es eso?") == ["que", "es", "eso"]


def test_chinese_and_japanese_questions_keep_their_content() -> None:
    """Question words and particles are cut out of CJK queries; a content character is a
    term of its own, so a one-character word finds the text that has it."""
    assert query_terms("王浩的猫叫什么名字？") == [
        "王浩",
        "猫叫",
        "名字",
        "王",
        "浩",
        "猫",
        "叫",
        "名",
        "字",
    ]
    assert "猫" in index_terms("我们从救助站领养了一只猫")
    assert query_terms("美咲は今どこで働いていますか？") == ["美咲", "今", "働", "美", "咲"]
    assert query_terms("ビスケは何を壊しましたか") == ["ビス", "スケ", "壊"]
    assert query_terms("什么") == ["什么"]  # nothing else left: the run itself


def test_content_size_counts_what_a_text_says_in_every_script() -> None:
    # The same statement says about as much in every script: a bigram of an unspaced
    # script counts half, as a word of those scripts is about two characters.
    same = ["I live in Beijing", "我住在北京", "Я живу в Москве", "أنا أعيش في عمان"]
    assert [content_size(t) for t in same] == [2.0, 2.0, 2.0, 2.0]
    # Only English, Russian and Arabic function words are known to the index side.
    assert content_size("Ich wohne in München") == 3.0
    # Filler and function words say nothing; emoji and punctuation are no words.
    assert content_size("ok, so I am") == 0.0
    assert content_size("👍🎉!!") == 0.0
    assert content_size("go on") == 0.0
    assert content_size("Bad news") == 2.0
    # Repeats count once: it is what the text says, not how long it is.
    assert content_size("tea tea tea tea") == 1.0


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_content_size_is_the_content_terms_weighed(text: str) -> None:
    size = content_size(text)
    terms = content_terms(text)
    assert 0.5 * len(terms) <= size <= len(terms)


def test_cut_text_ends_between_graphemes() -> None:
    from cairn.core.analysis import cut_text
    from cairn.core.slates import preview

    accent = "a" * 198 + "e\u0301" + "tail"  # é as e + a combining acute, at 199-200
    assert preview(accent) == "a" * 198 + "…"  # not "…e" without its accent
    family = "x" * 195 + "👩\u200d👩\u200d👧" + "!"  # one emoji of five code points
    assert cut_text(family, 199) == "x" * 195
    assert cut_text(family, 200) == "x" * 195 + "👩\u200d👩\u200d👧"
    assert cut_text("short", 200) == "short"
    assert cut_text("한국어 텍스트", 3) == "한국어"


def test_unspaced_scripts_pair_graphemes_not_code_points() -> None:
    # Thai vowel and tone marks stay with their letter: "shrimp" shares no term with
    # "the farmer keeps rice in the granary" (ยุ้งฉาง), which it did through ุ้ and ้ง.
    assert query_terms("กุ้ง") == ["กุ้ง"]
    granary = index_text("ชาวนาเก็บข้าวไว้ในยุ้งฉาง").split()
    assert "ยุ้ง" in granary and not set(query_terms("กุ้ง")) & set(granary)
    assert not any(unicodedata.category(t[0]).startswith("M") for t in granary)
    # Unmarked runs pair characters as before.
    pairs = ["我", "我住", "住", "住在", "在", "在北", "北", "北京", "京"]
    assert index_text("我住在北京").split() == pairs


def test_every_scripts_digits_are_searched_as_ascii_digits() -> None:
    assert index_text("मेरा पिन कोड ११००१ है").split()[3] == "11001"
    for digits in ("٣٠٤", "۳۰۴", "৩০৪", "๓๐๔", "３０４", "\U00011069\U00011066\U0001106a"):
        assert query_terms(digits) == ["304"], digits
