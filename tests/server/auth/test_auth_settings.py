"""The token policies' settings: every bound and rule, refused with fixed messages that never repeat the value; and
the loopback rule's one home, which the settings and the admin listener share."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from soklet_core.mcp.server import auth
from soklet_core.mcp.server.admission import AdmissionPolicy
from soklet_core.mcp.server.auth import IntrospectionAdmission, IntrospectionSettings, JwtAdmission, JwtSettings
from soklet_core.mcp.server.loopback import is_loopback_host

JWT: dict[str, Any] = {"issuer": "https://auth.example", "audience": "mcp", "jwks_url": "https://auth.example/jwks"}
INTROSPECTION: dict[str, Any] = {
    "introspection_url": "https://auth.example/introspect",
    "client_id": "soklet",
    "client_secret": "the-client-secret-value",
}
#: A value that must never appear in a refusal's message.
MARKER = "MARKER-never-echoed"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("[::1]", False),
        ("", False),
    ],
)
def test_is_loopback_host(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_the_defaults() -> None:
    settings = JwtSettings(**JWT)
    assert (settings.subject_claim, settings.partition_claim) == ("sub", None)
    assert (settings.leeway, settings.refresh_interval) == (timedelta(seconds=30), timedelta(seconds=30))
    assert settings.required_scopes == frozenset()
    introspection = IntrospectionSettings(**INTROSPECTION)
    assert (introspection.cache_ttl, introspection.cache_size, introspection.max_concurrent) == (
        timedelta(seconds=60),
        10_000,
        16,
    )


def test_settings_are_frozen_slotted_and_keyword_only() -> None:
    settings = JwtSettings(**JWT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.issuer = "https://other.example"  # type: ignore[misc]
    assert not hasattr(settings, "__dict__")
    with pytest.raises(TypeError):
        JwtSettings("https://auth.example", "mcp")  # type: ignore[misc]


@pytest.mark.parametrize(
    "url",
    [
        "https://auth.example/jwks",
        "https://auth.example:8443/jwks",
        "http://127.0.0.1:8080/jwks",
        "http://localhost/jwks",
        "http://[::1]:9000/jwks",
        "HTTPS://auth.example/jwks",
    ],
)
def test_accepted_urls(url: str) -> None:
    JwtSettings(**{**JWT, "jwks_url": url})
    IntrospectionSettings(**{**INTROSPECTION, "introspection_url": url})


@pytest.mark.parametrize(
    "url",
    [
        f"http://auth.example/{MARKER}",
        f"http://10.0.0.1/{MARKER}",
        f"ftp://auth.example/{MARKER}",
        f"https:///{MARKER}",
        f"https://user:{MARKER}@auth.example/jwks",
        f"https://auth.example/jwks#{MARKER}",
        f"https://auth.example:port/{MARKER}",
        f"https://auth.example/{MARKER} with space",
        f"auth.example/{MARKER}",
        "",
    ],
)
def test_refused_urls_never_echo_the_value(url: str) -> None:
    for field, build in (
        ("jwks_url", lambda: JwtSettings(**{**JWT, "jwks_url": url})),
        ("issuer", lambda: JwtSettings(**{**JWT, "issuer": url})),
        ("introspection_url", lambda: IntrospectionSettings(**{**INTROSPECTION, "introspection_url": url})),
        ("issuer", lambda: IntrospectionSettings(**{**INTROSPECTION, "issuer": url})),
    ):
        with pytest.raises(ValueError, match=field) as caught:
            build()
        assert MARKER not in str(caught.value)


@pytest.mark.parametrize(
    "sources",
    [{}, {"jwks_url": "https://auth.example/jwks", "jwks_file": Path("/etc/jwks.json")}],
)
def test_exactly_one_key_source(sources: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one of jwks_url and jwks_file"):
        JwtSettings(issuer="https://auth.example", audience="mcp", **sources)


def test_a_key_file_source() -> None:
    assert JwtSettings(issuer="https://auth.example", audience="mcp", jwks_file=Path("jwks.json")).jwks_url is None
    with pytest.raises(TypeError, match="jwks_file"):
        JwtSettings(issuer="https://auth.example", audience="mcp", jwks_file="jwks.json")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("leeway", timedelta(minutes=5, seconds=1), ValueError),
        ("leeway", timedelta(seconds=-1), ValueError),
        ("leeway", 30, TypeError),
        ("refresh_interval", timedelta(milliseconds=999), ValueError),
        ("refresh_interval", timedelta(hours=1, seconds=1), ValueError),
        ("subject_claim", "", ValueError),
        ("subject_claim", "c" * 65, ValueError),
        ("subject_claim", None, TypeError),
        ("partition_claim", "", ValueError),
        ("partition_claim", "tab\there", ValueError),
        ("required_scopes", "files:read", TypeError),
        ("required_scopes", frozenset({"has space"}), ValueError),
        ("required_scopes", frozenset({'quote"'}), ValueError),
        ("audience", "", ValueError),
        ("audience", 7, TypeError),
    ],
)
def test_jwt_settings_bounds(field: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        JwtSettings(**{**JWT, field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [("leeway", timedelta(minutes=5)), ("leeway", timedelta(0)), ("refresh_interval", timedelta(seconds=1))],
)
def test_jwt_settings_edges_are_accepted(field: str, value: object) -> None:
    JwtSettings(**{**JWT, field: value})


def test_claim_names_of_64_characters_are_accepted() -> None:
    settings = JwtSettings(**JWT, subject_claim="s" * 64, partition_claim="p" * 64)
    assert len(settings.partition_claim or "") == 64


def test_required_scopes_become_a_frozenset() -> None:
    settings = JwtSettings(**JWT, required_scopes=["a:read", "a:read", "b"])  # type: ignore[arg-type]
    assert settings.required_scopes == frozenset({"a:read", "b"})


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("client_id", "", ValueError),
        ("client_secret", "", ValueError),
        ("client_secret", None, TypeError),
        ("cache_ttl", timedelta(hours=2), ValueError),
        ("cache_size", 0, ValueError),
        ("cache_size", True, TypeError),
        ("max_concurrent", 0, ValueError),
        ("max_concurrent", 1025, ValueError),
        ("audience", "", ValueError),
        ("leeway", timedelta(minutes=6), ValueError),
    ],
)
def test_introspection_settings_bounds(field: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        IntrospectionSettings(**{**INTROSPECTION, field: value})


def test_a_refused_secret_is_never_echoed() -> None:
    with pytest.raises(ValueError, match="client_secret") as caught:
        IntrospectionSettings(**{**INTROSPECTION, "client_secret": MARKER + "\n"})
    assert MARKER not in str(caught.value)


def test_the_client_secret_is_never_in_repr() -> None:
    settings = IntrospectionSettings(**INTROSPECTION)
    assert INTROSPECTION["client_secret"] not in repr(settings)
    assert "client_secret" not in repr(settings)


def test_policy_builds_each_policy() -> None:
    async def build() -> tuple[object, object]:
        jwt_policy, introspection_policy = JwtSettings(**JWT).policy(), IntrospectionSettings(**INTROSPECTION).policy()
        await jwt_policy.aclose()
        await introspection_policy.aclose()
        return jwt_policy, introspection_policy

    jwt_policy, introspection_policy = asyncio.run(build())
    assert isinstance(jwt_policy, JwtAdmission)
    assert isinstance(introspection_policy, IntrospectionAdmission)
    assert isinstance(jwt_policy, AdmissionPolicy)
    assert isinstance(introspection_policy, AdmissionPolicy)
    assert repr(jwt_policy) == "JwtAdmission(issuer='https://auth.example', audience='mcp')"
    assert INTROSPECTION["client_secret"] not in repr(introspection_policy)


def test_the_public_surface() -> None:
    assert set(auth.__all__) == {
        "SIGNING_ALGORITHMS",
        "IntrospectionAdmission",
        "IntrospectionSettings",
        "JwksSource",
        "JwtAdmission",
        "JwtSettings",
    }
    for name in auth.__all__:
        assert getattr(auth, name).__doc__
