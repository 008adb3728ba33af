# ruff: noqa: RUF002 -- Hebrew letters in code and comments
"""A light stemmer for Hebrew words: the plural ending off the back, the attached particles
off the front.

Hebrew writes its commonest particles as one letter joined to the next word: ``ו`` "and",
``ה`` "the", ``ב`` "in", ``ל`` "to", ``מ`` "from", ``ש`` "that", ``כ`` "as", often two or three
at once (``וכשהכלב``, "and when the dog"). Unstemmed, ``הכלב`` ("the dog") and ``כלב`` ("a dog")
are two terms, and a question rarely uses the form its answer does. Those seven letters also
begin many words of their own (``משמרות``, "shifts"; ``בית``, "house"), and which ones are
particles cannot be told without a dictionary; what is consistent is to take every leading
particle letter off while at least three letters remain (the length of most Hebrew roots): a
word then gets the same stem with any particles attached (``משמרות``, ``ממשמרות`` and
``והמשמרות`` are all ``שמר``), at the price of some unrelated words sharing a stem, which the
other terms of a question and the vector lane tell apart. The plural endings ``ים`` and ``ות``
come off first (``הכלבים``, "the dogs", is ``כלב``, not ``בים``), again only where three
letters remain.
"""

from __future__ import annotations

PARTICLES = frozenset("והבלמשכ")
PLURALS = ("ים", "ות")
MIN_STEM = 3
# Final letter forms (a word's last letter) as the plain letters a suffix would leave there.
_FINALS = str.maketrans("ךםןףץ", "כמנפצ")


def prefix_stem(word: str) -> str:
    """``word`` without its plural ending and its leading particle letters, keeping at least
    ``MIN_STEM`` letters (see the module); final letter forms as the plain ones, so
    ``טלפון`` and ``טלפונים`` meet."""
    if word.endswith(PLURALS) and len(word) - 2 >= MIN_STEM:
        word = word[:-2]
    word = word.translate(_FINALS)
    i = 0
    while i < len(word) - MIN_STEM and word[i] in PARTICLES:
        i += 1
    return word[i:]
