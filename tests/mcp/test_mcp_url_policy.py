"""URL-mode elicitation rules: HTTPS, loopback HTTP only in development, no userinfo/query/fragment, handles."""

from __future__ import annotations

import pytest

from soklet_core.mcp import McpModelErrorReason
from soklet_core.mcp.model import (
    MIN_HANDLE_BYTES,
    InputRequestError,
    check_elicitation_url,
    is_opaque_handle,
    mint_url_handle,
    url_with_handle,
)

R = McpModelErrorReason

ACCEPTED = [
    "https://approve.example.com/mcp/approve/AbCdEfGhIjKlMnOpQrStUv",
    "https://approve.example.com",
    "https://approve.example.com/",
    "HTTPS://Approve.Example.COM/x",
    "https://approve.example.com:8443/x",
    "https://127.0.0.1/x",
    "https://[2001:db8::1]:443/x",
    "https://localhost/x",
    "https://a.example/path%20with%20escapes/@at-in-path",
]


@pytest.mark.parametrize("url", ACCEPTED)
def test_accepted_in_production(url: str) -> None:
    assert check_elicitation_url(url) == url


@pytest.mark.parametrize(
    "url", ["http://localhost/x", "http://localhost:8765/approve/h", "http://127.0.0.1:9/x", "http://[::1]:8080/x"]
)
def test_loopback_http_only_in_development(url: str) -> None:
    assert check_elicitation_url(url, development=True) == url
    with pytest.raises(InputRequestError) as caught:
        check_elicitation_url(url)
    assert caught.value.reason is R.INSECURE_URL


@pytest.mark.parametrize(
    "url", ["http://example.com/x", "http://localhost.example.com/x", "http://127.0.0.2/x", "http://10.0.0.1/x"]
)
def test_http_elsewhere_refused_even_in_development(url: str) -> None:
    for development in (False, True):
        with pytest.raises(InputRequestError) as caught:
            check_elicitation_url(url, development=development)
        assert caught.value.reason is R.INSECURE_URL


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://user@approve.example.com/x", R.URL_USERINFO),
        ("https://user:pass@approve.example.com/x", R.URL_USERINFO),
        ("https://:@approve.example.com/x", R.URL_USERINFO),
        ("https://@approve.example.com/x", R.URL_USERINFO),
        ("https://approve.example.com/x?user=alice", R.URL_QUERY_OR_FRAGMENT),
        ("https://approve.example.com/x?", R.URL_QUERY_OR_FRAGMENT),
        ("https://approve.example.com/x#token=abc", R.URL_QUERY_OR_FRAGMENT),
        ("https://approve.example.com/x#", R.URL_QUERY_OR_FRAGMENT),
        ("https://approve.example.com?x", R.URL_QUERY_OR_FRAGMENT),
        ("ftp://approve.example.com/x", R.INVALID_URL),
        ("javascript:alert(1)", R.INVALID_URL),
        ("https:approve.example.com/x", R.INVALID_URL),
        ("//approve.example.com/x", R.INVALID_URL),
        ("/relative/path", R.INVALID_URL),
        ("https:///x", R.INVALID_URL),
        ("https://approve example.com/x", R.INVALID_URL),
        ("https://approve.example.com/x y", R.INVALID_URL),
        ("https://approve.example.com/\tx", R.INVALID_URL),
        ("https://approve.example.com\\x", R.INVALID_URL),
        ("https://bücher.example/x", R.INVALID_URL),
        ("https://approve.example.com:99999/x", R.INVALID_URL),
        ("https://approve.example.com:/x", R.INVALID_URL),
        ("https://approve.example.com:8a/x", R.INVALID_URL),
        ("https://-bad-.example/x", R.INVALID_URL),
        ("https://[not-v6]/x", R.INVALID_URL),
        ("https://[::1/x", R.INVALID_URL),
        ("", R.INVALID_URL),
    ],
)
def test_refused(url: str, reason: McpModelErrorReason) -> None:
    for development in (False, True):
        with pytest.raises(InputRequestError) as caught:
            check_elicitation_url(url, development=development)
        assert caught.value.reason is reason
        # the URL (which may carry a secret) never reaches the message
        assert url == "" or url not in str(caught.value)


def test_non_string_refused() -> None:
    with pytest.raises(InputRequestError):
        check_elicitation_url(b"https://a.example/x")  # type: ignore[arg-type]


def test_handles() -> None:
    assert MIN_HANDLE_BYTES == 16
    handles = {mint_url_handle() for _ in range(100)}
    assert len(handles) == 100
    assert all(is_opaque_handle(handle) and len(handle) == 43 for handle in handles)
    assert len(mint_url_handle(16)) == 22
    assert is_opaque_handle(mint_url_handle(16))
    for weak in (15, 0, -1, True):
        with pytest.raises(InputRequestError) as caught:
            mint_url_handle(weak)
        assert caught.value.reason is R.WEAK_HANDLE
    for not_handle in ("short", "a" * 21, "has space" * 5, "x" * 21 + "=", None):
        assert not is_opaque_handle(not_handle)
    assert is_opaque_handle("a" * 22)


def test_url_with_handle() -> None:
    handle = mint_url_handle()
    assert url_with_handle("https://approve.example.com/mcp/approve", handle) == (
        "https://approve.example.com/mcp/approve/" + handle
    )
    assert url_with_handle("https://approve.example.com/mcp/approve/", handle).endswith("/approve/" + handle)
    assert url_with_handle("http://127.0.0.1:8765/approve", handle, development=True).startswith("http://127.0.0.1")
    with pytest.raises(InputRequestError) as caught:
        url_with_handle("https://approve.example.com/a", "alice")
    assert caught.value.reason is R.WEAK_HANDLE
    with pytest.raises(InputRequestError) as caught:
        url_with_handle("https://approve.example.com/a?next=1", handle)
    assert caught.value.reason is R.URL_QUERY_OR_FRAGMENT
    with pytest.raises(InputRequestError) as caught:
        url_with_handle("http://127.0.0.1:8765/approve", handle)
    assert caught.value.reason is R.INSECURE_URL
