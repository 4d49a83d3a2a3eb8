"""Resource-template matching without a backtracking regex (issue 8: "no regular expression with overlapping
repetition anywhere"), and the host check of URL-mode elicitation without nested repetition.

Before issue 8 a template compiled to a regex of escaped literals and one lazy loop per variable: on
``file:///{+a}/{+b}/{+c}/{+d}x`` a 400-character URI took 10 s. The matcher now walks the template's parts; the
hypothesis tests below hold it to the answers of that regex (copied here as the oracle) on short inputs.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from soklet_core.mcp import McpModelErrorReason
from soklet_core.mcp.model import InputRequestError, check_elicitation_url
from soklet_core.mcp.model.errors import RegistrationError
from soklet_core.mcp.model.uri_templates import MAX_MATCHED_URI_CHARS, UriTemplate

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Templates whose matcher backtracked for a power of the URI's length before issue 8.
SEVERAL_VARIABLES = [
    "file:///{+a}/{+b}/{+c}/{+d}x",
    "file:///{+a}{+b}{+c}{+d}{+e}{+f}{+g}{+h}",
    "file:///{a}{b}{c}{d}x",
    "file:///{+a}/{b}/{+c}/{d}.json",
    "test://template/{id}/{+rest}",
]


def _old_matcher(template: UriTemplate) -> re.Pattern[str]:
    """The regex a template compiled to before issue 8 (the oracle; its shape is what the audit now forbids)."""
    parts = template._parts  # type: ignore[attr-defined]
    pattern = ""
    for index, (literal, _name, reserved) in enumerate(parts[:-1]):
        pattern += re.escape(literal) + f"(?P<v{index}>{'.+?' if reserved else '[^/?#]+?'})"
    return re.compile(pattern + re.escape(parts[-1][0]))


def _old_match(template: UriTemplate, uri: str) -> dict[str, str] | None:
    from urllib.parse import unquote

    found = _old_matcher(template).fullmatch(uri)
    if found is None:
        return None
    return {name: unquote(found.group(f"v{index}")) for index, name in enumerate(template.variables)}


# Small alphabets, so that literals, separators and stop characters collide often.
_LITERAL_CHARS = "ab/?#.%2"
_URI_CHARS = _LITERAL_CHARS + "\n"


@st.composite
def templates_and_uris(draw: st.DrawFn) -> tuple[str, str]:
    """A template of 1-4 variables and a URI built along it (often matching, often almost)."""
    count = draw(st.integers(1, 4))
    template, uri = "t:", "t:"
    for index in range(count + 1):
        literal = draw(st.text(_LITERAL_CHARS, max_size=2))
        template += literal
        uri += literal
        if index < count:
            template += "{" + draw(st.sampled_from(["", "+"])) + f"v{index}" + "}"
            uri += draw(st.text(_URI_CHARS, max_size=5))
    if draw(st.booleans()):
        uri = draw(st.text(_URI_CHARS, max_size=3)) + uri[draw(st.integers(0, 3)) :]
    return template, uri


@pytest.mark.slow
@SETTINGS
@given(templates_and_uris())
@example(("t:{+a}/{+b}", "t:x/y/z"))  # ambiguous: the leftmost, shortest first variable wins, as before
@example(("t:{a}{b}", "t:xyz"))
@example(("t:{+a}", "t:x\ny"))  # "." of the old regex never took a line feed
@example(("t:{a}", "t:x\ny"))  # [^/?#] did
def test_matcher_agrees_with_the_old_regex(case: tuple[str, str]) -> None:
    text, uri = case
    template = UriTemplate.parse(text)
    assert template.match(uri) == _old_match(template, uri)


@SETTINGS
@given(st.text(_URI_CHARS, max_size=12), st.sampled_from(SEVERAL_VARIABLES))
def test_matcher_agrees_on_arbitrary_uris(suffix: str, text: str) -> None:
    template = UriTemplate.parse(text)
    for uri in ("file:///" + suffix, "test://template/" + suffix, suffix):
        assert template.match(uri) == _old_match(template, uri)


@pytest.mark.parametrize("text", SEVERAL_VARIABLES)
def test_several_variables_on_long_uris_finish_fast(text: str) -> None:
    # A generous bound: the old regex took 10 s at 400 characters and grew with a power of the length.
    template = UriTemplate.parse(text)
    for uri in (
        "file:///" + "/" * 3992,
        "file:///" + "a/" * 1996,
        "file:///" + "a/" * 1995 + "ax",
        "test://template/" + "a" * 3984,
    ):
        assert len(uri) >= 4000
        started = time.monotonic()
        template.match(uri)
        assert time.monotonic() - started < 1.0


def test_a_long_ambiguous_uri_still_matches() -> None:
    template = UriTemplate.parse("file:///{+a}/{+b}/{+c}/{+d}x")
    uri = "file:///" + "a/" * 1995 + "ax"
    assert template.match(uri) == {"a": "a", "b": "a", "c": "a", "d": "/".join(["a"] * 1992) + "/a"}


def test_uri_length_bound_at_its_edge() -> None:
    template = UriTemplate.parse("file:///{+path}")
    at_limit = "file:///" + "p" * (MAX_MATCHED_URI_CHARS - len("file:///"))
    assert len(at_limit) == MAX_MATCHED_URI_CHARS
    assert template.match(at_limit) == {"path": at_limit[len("file:///") :]}
    assert template.match(at_limit + "p") is None


@pytest.mark.parametrize(
    ("text", "variables"),
    [("test://{a.b}", ("a.b",)), ("test://{+x.y.z}/{q_1}", ("x.y.z", "q_1"))],
)
def test_dotted_variable_names_are_accepted(text: str, variables: tuple[str, ...]) -> None:
    assert UriTemplate.parse(text).variables == variables


@pytest.mark.parametrize("text", ["test://{.a}", "test://{a.}", "test://{a..b}", "test://{.}", "test://{+.}"])
def test_misplaced_dots_in_a_variable_name_are_refused(text: str) -> None:
    with pytest.raises(RegistrationError) as caught:
        UriTemplate.parse(text)
    assert caught.value.reason is McpModelErrorReason.INVALID_URI_TEMPLATE


def test_the_constructor_parses_and_validates() -> None:
    template = UriTemplate("test://{+x.y}/{q}")
    assert template == UriTemplate.parse("test://{+x.y}/{q}")
    assert hash(template) == hash(UriTemplate.parse("test://{+x.y}/{q}"))
    assert template.variables == ("x.y", "q")
    assert template.match("test://a/b/c") == {"x.y": "a/b", "q": "c"}
    assert repr(template) == "UriTemplate('test://{+x.y}/{q}')"
    for bad in ("test://{a}/{a}", 7):
        with pytest.raises(RegistrationError) as caught:
            UriTemplate(bad)  # type: ignore[arg-type]
        assert caught.value.reason is McpModelErrorReason.INVALID_URI_TEMPLATE


# --- URL-mode elicitation: the host check -------------------------------------------------------------------------

#: The host pattern before issue 8 (star height 2: the audit refuses it now), as the oracle.
_OLD_HOST = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*")


def _refusal(url: str) -> McpModelErrorReason | None:
    try:
        check_elicitation_url(url)
    except InputRequestError as error:
        return error.reason
    return None


@SETTINGS
@given(st.text("aZ0-.", max_size=12))
@example("")
@example("a.")
@example(".a")
@example("a..b")
@example("a-.b")
@example("a.-b")
@example("-")
def test_host_check_agrees_with_the_old_pattern(host: str) -> None:
    # The URL is lowercased before the host check, as the old pattern assumed.
    expected = None if _OLD_HOST.fullmatch(host.lower()) else McpModelErrorReason.INVALID_URL
    assert _refusal(f"https://{host}/x") is expected
