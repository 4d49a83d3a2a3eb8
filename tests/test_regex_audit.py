"""No regular expression in the project may backtrack without bound (issue 8: "no regular expression with
overlapping repetition anywhere, and a test that scans for one").

The checker lives in ``tests/support_regex_audit.py``; these tests pin it on known-bad and known-good patterns,
then scan every Python file of the project (packages, tools, benchmarks, tests, and any extension-less script with a
python shebang). A pattern the scan cannot fold to text (built at run time) fails unless
:data:`COMPUTED` names it with the reason it is safe; a flagged pattern fails unless :data:`REVIEWED` names it
with the reason it is safe anyway. Entries of either list that no longer match anything fail too.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support_regex_audit import audit_pattern, project_python_files, regex_sites, regex_sites_in_source

ROOT = Path(__file__).resolve().parent.parent

#: Patterns built at run time, by (file, source of the pattern expression): why each is safe.
COMPUTED: dict[tuple[str, str], str] = {
    # The application's own pattern for a form text field (text_field(pattern=...)), written by the server's
    # author, never by a client. Auditing it is the application's job (this checker could do it at
    # registration: reported, not done here).
    ("soklet_core/mcp/model/elicitation.py", "pattern"): "application-written form-field pattern",
    # An alternation of re.escape'd literal stems: no repetition at all, so nothing to backtrack over.
    ("soklet_core/mcp/model/form_policy.py", "'|'.join(map(re.escape, ordered))"): "escaped literals, no repeat",
    # A test oracle: the URI-template regex of before issue 8 ((.+?)/(.+?)/...), which the matcher must agree
    # with; it runs on inputs of at most a few dozen characters, where its backtracking costs nothing.
    ("tests/mcp/test_mcp_uri_matching.py", "pattern + re.escape(parts[-1][0])"): "oracle, short inputs only",
}

#: Flagged patterns kept on purpose, by (file, pattern text): why each is linear anyway.
REVIEWED: dict[tuple[str, str], str] = {
    # A test oracle: the host pattern of url_policy.py before issue 8 (star height 2), which the label-by-label
    # check must agree with; it runs on hosts of at most a dozen characters.
    (
        "tests/mcp/test_mcp_uri_matching.py",
        r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*",
    ): "oracle, short inputs only",
}

#: ``_ALREADY_NORMAL`` of soklet_core/protection/paths.py before issue 8: 58 bytes froze the server.
OLD_ALREADY_NORMAL = r"/(?:[A-Za-z0-9\-_~!$&'()*+,;=:@][A-Za-z0-9\-._~!$&'()*+,;=:@]*/?)*"

KNOWN_BAD = [
    (r"(a+)*", "nested"),
    (r"(a|a)*", "alternation"),
    (r"(a|ab)*", "nested"),  # the parser factors it into a(?:|b): a branch of varying length
    (r"\d+\d+", "adjacent"),
    (r"(x[y]*)*", "nested"),
    (OLD_ALREADY_NORMAL, "nested"),
    (r"\s*\s*", "adjacent"),
    (r"a*a+", "adjacent"),
    (r"(?:x\s*)?\s*", "adjacent"),
    (r"\s*;?\s*", "adjacent"),
    (r"(.+?)/(.+?)", "adjacent"),
    (r"(a?a?)*", "nested"),
    (r"(?:ab|[ab]c)*", "alternation"),
    (r"(?:a{1,3}){2,}", "nested"),
    (r"(\w+)\1*", "nested"),
    (r"(?i:a)*A*", "adjacent"),
    (rb"(?:\d+x?)+", "nested"),
    (r"(?:[0-9]x|\dy)+", "alternation"),
    # Possessive outside, but the rules still hold inside its body.
    (r"(?:(?:a+)*)*+", "nested"),
    (r"(?:x\s*\s*)*+", "adjacent"),
    (r"(?>(?:(?:a+)*)*)", "nested"),
    # An atomic group is exempt only when it holds just the repeat: here the repeat has company.
    (r"(?>x(?:a[0-9]*)*)", "nested"),
]

KNOWN_GOOD = [
    r"[0-9]{1,9}",
    r"%([0-9A-Fa-f]{2})",
    r"\x1b\[[0-9;?]*[A-Za-z]",
    r"(?:ab)*",
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    r"[0-9]*\.[0-9]*",
    r"\n\s*\n",
    r"[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]",
    r"[a-z0-9-]*[a-z0-9]",
    r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(?:\s*;[\x20-\x7e]*)?",
    r"(?:\d{2})+",
    r"/{2,}",
    r"(?:ab|cd)*",
    # A possessive repeat never gives an iteration back, so its body's split across iterations is fixed.
    r"(?:,-?[0-9]+(?:\.[0-9]+)?(?![0-9.]))*+",
    r"(?:\[[0-9]*\]|x)*+",
    # The same possessive repeat spelled as an atomic group, as CPython before 3.11.5 needs it.
    r"(?>(?:,-?[0-9]+(?:\.[0-9]+)?(?![0-9.])){0,99})",
]


@pytest.mark.parametrize(("pattern", "rule"), KNOWN_BAD)
def test_checker_flags_known_bad(pattern: str | bytes, rule: str) -> None:
    assert rule in {finding.rule for finding in audit_pattern(pattern)}


@pytest.mark.parametrize("pattern", KNOWN_GOOD)
def test_checker_passes_known_good(pattern: str) -> None:
    assert audit_pattern(pattern) == []


def test_checker_honours_flags() -> None:
    # With IGNORECASE, "a*" and "A*" overlap; without it, they do not.
    assert audit_pattern(r"a*A*") == []
    assert audit_pattern(r"a*A*", re.IGNORECASE)
    # Under re.VERBOSE the space is not a character: "\d+ \d+" is "\d+\d+".
    assert audit_pattern(r"\d+ \d+") == []
    assert audit_pattern(r"\d+ \d+", re.VERBOSE)


def test_scan_folds_constants_and_reports_computed_patterns() -> None:
    source = """
import re
from re import fullmatch as full
from soklet_core.protection.paths import MAX_ENDPOINT_PATH_CHARS
PART = "[a-z]"
BAD = re.compile(PART + "+" + PART + "+")
LONG = re.compile(f"[a-z]{{1,{MAX_ENDPOINT_PATH_CHARS}}}")
ESCAPED = re.compile(re.escape("a+b") + r"\\s*", flags=re.ASCII)

def check(text: str, pattern: str) -> bool:
    PART = "x"
    return bool(full(pattern, text)) or bool(re.search(PART, text)) or bool(BAD.match(text))
"""
    sites = regex_sites_in_source(source, "example.py")
    by_line = {site.line: site for site in sites}
    assert by_line[6].pattern == "[a-z]+[a-z]+"
    assert [finding.rule for finding in audit_pattern(by_line[6].pattern)] == ["adjacent"]
    assert by_line[7].pattern == "[a-z]{1,2048}"
    assert by_line[8].pattern == r"a\+b\s*"
    assert by_line[8].flags == re.ASCII
    # A parameter, and a local that shadows a module constant, cannot be folded.
    assert [site.source for site in sites if site.pattern is None] == ["pattern", "PART"]
    assert len(sites) == 5  # BAD.match uses a compiled pattern: audited where it was compiled


def test_scan_covers_every_kind_of_project_file() -> None:
    files = {path.relative_to(ROOT).as_posix() for path in project_python_files(ROOT)}
    for expected in (
        "tools/conformance.py",
        "tools/gen_docs.py",
        "benchmarks/server_round_trips.py",
        "soklet_core/protection/paths.py",
        "soklet_cli/app.py",
        "tests/support_regex_audit.py",
    ):
        assert expected in files
    assert not any(name.startswith(".venv/") for name in files)
    assert "scripts/test" not in files  # bash
    assert "scripts/conformance" not in files  # bash, which runs tools/conformance.py


def test_old_already_normal_is_caught_in_its_file() -> None:
    # The scan on the file as it was before issue 8: the module-level constant is found, folded and flagged.
    try:
        old = subprocess.run(
            ["git", "show", "dc8605a:soklet_core/protection/paths.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        old = f'import re\n_ALREADY_NORMAL = re.compile(r"{OLD_ALREADY_NORMAL}")\n'
    sites = regex_sites_in_source(old, "paths.py", "soklet_core.protection.paths")
    flagged = [site.pattern for site in sites if site.pattern is not None and audit_pattern(site.pattern)]
    assert flagged == [OLD_ALREADY_NORMAL]


@pytest.mark.slow
def test_no_overlapping_repetition_anywhere() -> None:
    problems: list[str] = []
    computed_seen: set[tuple[str, str]] = set()
    reviewed_seen: set[tuple[str, str]] = set()
    for path in project_python_files(ROOT):
        for site in regex_sites(path, ROOT):
            if site.pattern is None:
                key = (site.path, site.source)
                if key in COMPUTED:
                    computed_seen.add(key)
                else:
                    problems.append(f"{site.path}:{site.line}: pattern built at run time: {site.source}")
                continue
            findings = audit_pattern(site.pattern, site.flags)
            text = site.pattern if isinstance(site.pattern, str) else site.pattern.decode("latin-1")
            if findings and (site.path, text) in REVIEWED:
                reviewed_seen.add((site.path, text))
            elif findings:
                rules = ", ".join(sorted({finding.rule for finding in findings}))
                problems.append(f"{site.path}:{site.line}: {rules}: {site.pattern!r}")
    problems += [f"stale COMPUTED entry {key}" for key in COMPUTED.keys() - computed_seen]
    problems += [f"stale REVIEWED entry {key}" for key in REVIEWED.keys() - reviewed_seen]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "template",
    [
        "test://template/{id}/data",
        "file:///{name}",
        "file:///{+path}",
        "file:///{a}-{b}",
        "file:///{a}{b}",
        "file:///{+a}/{+b}/{+c}",
        "file:///{+a}/{+b}/{+c}/{+d}x",
        "file:///{+a}{+b}{+c}{+d}{+e}{+f}{+g}{+h}",
    ],
)
def test_uri_template_matchers(template: str) -> None:
    # The matcher of a resource template runs on every resources/read URI a client sends. Found by this audit:
    # "file:///{+a}/{+b}/{+c}/{+d}x" took 0.6 s on a 200-character URI and 10 s on 400 ((.+?)/(.+?)/...). It is
    # a walk over the template's parts now, with no regex: long URIs, matching or failing late, finish fast.
    import time

    from soklet_core.mcp.model.uri_templates import UriTemplate

    parsed = UriTemplate.parse(template)
    for uri in ("file:///" + "/" * 3992, "file:///" + "a/" * 1995 + "ax", "test://template/" + "a" * 3984 + "/data"):
        started = time.monotonic()
        parsed.match(uri)
        parsed.match(uri + "?")
        assert time.monotonic() - started < 2.0, uri[:40]
