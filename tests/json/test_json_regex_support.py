"""Both spellings of the JSON run patterns match alike (soklet_core/json/regex_support.py): the possessive one this
interpreter uses when its possessive repeats work, and the atomic-group one CPython before 3.11.5 needs. The test
command runs one interpreter, so the other spelling is built here by loading the modules again with the flag turned
the other way, and both are held to the same matches on inputs where the buggy engine went wrong."""

from __future__ import annotations

import importlib
import re
import sys
from types import ModuleType

import pytest

from soklet_core.json import regex_support

MODULES = ("soklet_core.json.scanner", "soklet_core.json.number_runs", "soklet_core.json.canonical")
PATTERNS = {
    "soklet_core.json.scanner": ("_RUN", "_RUN_OF_SCALARS"),
    "soklet_core.json.number_runs": ("_CANDIDATE", "_CHUNK"),
    "soklet_core.json.canonical": ("_CANONICAL_RUN",),
}
NUMBERS = ",".join(str(i) for i in range(70))
INPUTS = (
    '"x", 1e10001]',
    "1, 2, 3e5",
    '"a","b", x',
    "1,2,3",
    '1 , 2 ,\t"s", true, null, [], {} , x',
    "[" + NUMBERS + ",3e5]",
    NUMBERS + ",3e5]",
    NUMBERS + ",0.5,-1]",
    "1,2,",
    "-0,01",
)


def _other_spelling() -> dict[str, ModuleType]:
    """The run modules loaded again with the flag turned the other way; everything is put back before returning."""
    flag = regex_support.POSSESSIVE_REPEATS_WORK
    saved = {name: importlib.import_module(name) for name in MODULES}
    fresh = {}
    try:
        regex_support.POSSESSIVE_REPEATS_WORK = not flag  # type: ignore[misc]
        for name in MODULES:
            del sys.modules[name]
            fresh[name] = importlib.import_module(name)
    finally:
        regex_support.POSSESSIVE_REPEATS_WORK = flag  # type: ignore[misc]
        sys.modules.update(saved)
        for name, module in saved.items():  # the package's attributes too: importing set them to the fresh ones
            package, _, leaf = name.rpartition(".")
            setattr(sys.modules[package], leaf, module)
    return fresh


@pytest.fixture(scope="module")
def other() -> dict[str, ModuleType]:
    return _other_spelling()


def test_each_spelling_is_what_the_flag_says(other: dict[str, ModuleType]) -> None:
    for name, attributes in PATTERNS.items():
        for attribute in attributes:
            used: re.Pattern[str] = getattr(sys.modules[name], attribute)
            spelled: re.Pattern[str] = getattr(other[name], attribute)
            assert ("(?>" in used.pattern) is not regex_support.POSSESSIVE_REPEATS_WORK
            assert ("(?>" in spelled.pattern) is regex_support.POSSESSIVE_REPEATS_WORK


def _spans(modules: dict[str, ModuleType], text: str) -> list[tuple[int, int] | None]:
    spans: list[tuple[int, int] | None] = []
    for name, attributes in PATTERNS.items():
        for attribute in attributes:
            pattern: re.Pattern[str] = getattr(modules[name], attribute)
            for start in range(min(len(text), 8)):
                found = pattern.match(text, start)
                spans.append(None if found is None else found.span())
    return spans


@pytest.mark.parametrize("text", INPUTS)
def test_both_spellings_match_alike_where_possessive_repeats_work(other: dict[str, ModuleType], text: str) -> None:
    if not regex_support.POSSESSIVE_REPEATS_WORK:
        pytest.skip("this interpreter's possessive repeats are the ones the flag exists for (the next test)")
    assert _spans({name: sys.modules[name] for name in MODULES}, text) == _spans(other, text)


def test_where_the_flag_is_off_the_possessive_spelling_would_match_wrongly(other: dict[str, ModuleType]) -> None:
    used = {name: sys.modules[name] for name in MODULES}
    differing = [text for text in INPUTS if _spans(used, text) != _spans(other, text)]
    if regex_support.POSSESSIVE_REPEATS_WORK:
        assert differing == []
    else:
        assert differing, "the possessive spelling matched right here: the version bound in regex_support is stale"


def test_a_run_never_ends_on_a_separator() -> None:
    from soklet_core.json import scanner

    for text in INPUTS:
        found = scanner._RUN.match(text)
        if found is not None:
            assert found.group(0)[-1:] not in {",", " ", "\t"}, text
