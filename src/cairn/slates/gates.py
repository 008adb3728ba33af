"""Gate conditions of gated writes, evaluated on a step's output text.

All keys present in one condition must hold. ``contains`` is a case-sensitive substring test;
``regex`` a Python ``re.search``; ``equals`` compares with the output after trimming
surrounding whitespace; ``minLength``/``maxLength`` count characters of the untrimmed output;
``all`` holds when every sub-condition holds (vacuously for ``[]``), ``any`` when at least one
does (never for ``[]``), ``not`` when its sub-condition does not.
"""

from __future__ import annotations

import re

from cairn.slates.config import Condition


def evaluate_condition(condition: Condition, output: str) -> bool:
    """Whether ``output`` satisfies ``condition``."""
    if condition.contains is not None and condition.contains not in output:
        return False
    if condition.regex is not None and re.search(condition.regex, output) is None:
        return False
    if condition.equals is not None and output.strip() != condition.equals:
        return False
    if condition.min_length is not None and len(output) < condition.min_length:
        return False
    if condition.max_length is not None and len(output) > condition.max_length:
        return False
    if condition.all is not None and not all(evaluate_condition(c, output) for c in condition.all):
        return False
    if condition.any is not None and not any(evaluate_condition(c, output) for c in condition.any):
        return False
    return not (condition.not_ is not None and evaluate_condition(condition.not_, output))
