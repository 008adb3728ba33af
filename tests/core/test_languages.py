# ruff: noqa: RUF001 -- questions in many languages are what these tests are about
"""``cairn.core.languages.english_text``: which queries read as English (the default embedder
matches those on both of its models and weighs the lexical lane more; any other language on
the multilingual model alone)."""

from __future__ import annotations

import pytest

from cairn.core.languages import english_text


@pytest.mark.parametrize(
    "query",
    [
        "Where does Maya work now?",
        "What did Maria de la Cruz say about the move?",  # a Spanish name in English
        "Who is the son of the Die Hard actor?",
        "When is the 10k run? 🏃",
        "",
    ],
)
def test_english_questions_read_as_english(query: str) -> None:
    assert english_text(query)


@pytest.mark.parametrize(
    "query",
    [
        "Waar werkt Femke nu?",  # Dutch, every letter ASCII
        "Dove lavora Chiara adesso?",
        "Ou habite Solene maintenant ?",  # French typed without accents
        "Wo arbeitet Lena jetzt?",
        "Onde mora a Larissa agora?",
        "¿Dónde trabaja Nerea?",
        "Где работает Ольга?",
        "林晓住在哪里？",
        "Nerede çalışıyor Elif?",
        "Gdzie pracuje Łucja?",
    ],
)
def test_other_languages_do_not(query: str) -> None:
    assert not english_text(query)


def test_a_language_without_a_function_word_list_is_told_by_its_letters() -> None:
    # Polish has no list (``languages.LATIN``): unaccented, it reads as English.
    assert english_text("Gdzie pracuje Zuza?")
