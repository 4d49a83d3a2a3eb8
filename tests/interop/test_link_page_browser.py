"""URL elicitation end to end in a real browser: a real ``soklet serve --dev-key`` subprocess, ``account.link`` over
HTTP as a 2026-07-28 client sends it, and the machine's headless Chromium on the page the server links to. An accept
before the page is completed is asked again (the same URL); the button links; the retry's accept then completes,
once. The page's guards are checked in the browser (a forged post from another site) and on the wire: its headers,
a post without the form cookie, a second post.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from tests.interop.support_browser import PAGE_LOAD_TIMEOUT, chromium, require_browser
from tests.interop.support_server import Served, serving
from tests.server.support import Client, Reply

URL_CAPS: dict[str, Any] = {"elicitation": {"url": {}}}
ACCEPT = {"link": {"action": "accept"}}
CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require_browser()  # before the server starts: a missing browser fails here, loudly
    with serving(tmp_path_factory.mktemp("link-page")) as server:
        yield server


@pytest.fixture
def client(served: Served) -> Iterator[Client]:
    c = Client(served.url, path="")
    yield c
    c.close()


@contextmanager
def other_site(target: str, token: str) -> Iterator[str]:
    """A page on another site (``localhost``, where the link page is on ``127.0.0.1``) whose button posts the
    form to ``target`` with the right token: everything a cross-site forgery could send, bar the cookie."""
    page = (
        "<!DOCTYPE html><title>Win a prize</title>"
        f'<form method="post" action="{html.escape(target)}"><input type="hidden" name="csrf" '
        f'value="{html.escape(token)}"><button id="go">Claim</button></form>'
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def link_url(reply: Reply) -> str:
    assert reply.status == 200
    assert reply.result["resultType"] == "input_required", reply.result
    assert list(reply.result["inputRequests"]) == ["link"]
    url: str = reply.result["inputRequests"]["link"]["params"]["url"]
    return url


@pytest.mark.slow
def test_the_page_links_the_account_once(served: Served, client: Client) -> None:
    first = client.call("account.link", {}, capabilities=URL_CAPS)
    url = link_url(first)
    origin = served.url.rsplit("/", 1)[0]
    assert url.startswith(origin + "/link/")

    # An accept before the page was completed: the same URL again, not an error.
    early = client.retry("account.link", {}, first.state, ACCEPT, capabilities=URL_CAPS)
    assert "isError" not in early.result
    assert link_url(early) == url
    assert early.state != first.state

    with chromium() as browser:
        browser.get(url)
        text = browser.find_element(By.TAG_NAME, "body").text
        assert "Link your account to soklet for the caller of this request." in text
        assert "This link expires at " in text
        assert browser.title == "Link your account"
        token = browser.find_element(By.NAME, "csrf").get_attribute("value")
        cookie = browser.get_cookie("soklet_link_csrf")
        assert token
        assert cookie is not None
        assert cookie["value"] == token
        assert cookie["httpOnly"] is True
        assert cookie["sameSite"] == "Strict"
        assert cookie["path"] == url[len(origin) :]

        # A forged post (the form's token, but no cookie: what a cross-site form can send) changes nothing.
        forged = httpx.post(url, content=f"csrf={token}".encode(), headers=FORM)
        assert forged.status_code == 403
        assert "could not be verified" in forged.text
        # The same from another site in the same browser: the Strict cookie stays home, the post is refused.
        with other_site(url, token) as attacker:
            browser.get(attacker)
            browser.find_element(By.ID, "go").click()
            WebDriverWait(browser, PAGE_LOAD_TIMEOUT).until(lambda b: b.title != "Win a prize")
            assert browser.title == "Request refused"
        still = client.retry("account.link", {}, early.state, ACCEPT, capabilities=URL_CAPS)
        assert link_url(still) == url
        browser.get(url)

        browser.find_element(By.ID, "approve").click()
        # The click returns before the next page may have loaded: wait for it (bounded) before reading it.
        WebDriverWait(browser, PAGE_LOAD_TIMEOUT).until(lambda b: b.title != "Link your account")
        assert browser.title == "Account linked"
        assert "Your account is now linked to soklet." in browser.find_element(By.TAG_NAME, "body").text

        # Single use: the page again, and a second (otherwise valid) post, say "already used".
        browser.get(url)
        assert browser.title == "Link already used"
        second = httpx.post(
            url, content=f"csrf={token}".encode(), headers={**FORM, "Cookie": f"soklet_link_csrf={token}"}
        )
        assert second.status_code == 409
        assert "already used" in second.text

    linked = client.retry("account.link", {}, still.state, ACCEPT, capabilities=URL_CAPS)
    assert linked.text == "Account linked."
    assert "isError" not in linked.result
    again = client.retry("account.link", {}, still.state, ACCEPT, capabilities=URL_CAPS)
    assert again.result["isError"] is True
    # Consumed: the page now knows the handle no more than any other.
    assert httpx.get(url).status_code == 404


@pytest.mark.slow
def test_page_headers_and_refusals(served: Served, client: Client) -> None:
    url = link_url(client.call("account.link", {}, capabilities=URL_CAPS))
    page = httpx.get(url)
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "same-origin"
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "SameSite=Strict" in page.headers["set-cookie"]
    assert "HttpOnly" in page.headers["set-cookie"]
    token = page.cookies["soklet_link_csrf"]
    cookie = {"Cookie": f"soklet_link_csrf={token}"}
    assert httpx.post(url, content=b"{}", headers={"Content-Type": "application/json", **cookie}).status_code == 415
    big = b"csrf=" + b"a" * 5000
    assert httpx.post(url, content=big, headers={**FORM, **cookie}).status_code == 413
    assert httpx.post(url, content=b"csrf=wrong", headers={**FORM, **cookie}).status_code == 403
    assert httpx.post(url, content=b"a=1&b=2&c=3&d=4&e=5", headers={**FORM, **cookie}).status_code == 400
    assert httpx.delete(url).status_code == 405
    # An unknown handle: the one fixed "not found or expired" page, whatever is asked.
    unknown = url.rsplit("/", 1)[0] + "/" + "A" * 43
    for reply in (
        httpx.get(unknown),
        httpx.post(unknown, content=f"csrf={token}".encode(), headers={**FORM, **cookie}),
    ):
        assert reply.status_code == 404
        assert "not found or has expired" in reply.text
        assert reply.headers["content-security-policy"] == CSP


def test_a_missing_browser_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.interop import support_browser

    monkeypatch.setattr(support_browser, "CHROMIUM", tmp_path / "no-chromium")
    with pytest.raises(pytest.fail.Exception, match="bash scripts/browser"):
        support_browser.require_browser()
