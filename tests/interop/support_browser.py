"""The machine's headless Chromium, driven by Selenium through the machine's chromedriver.

``scripts/browser`` (run by ``scripts/test``) installs Debian's ``chromium`` and ``chromium-driver``; this module
never downloads anything (the driver's path is given, so Selenium Manager stays idle) and fails — never skips — when
either binary is missing.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Seconds a page may take to load (the server is on loopback; this only bounds a hang).
PAGE_LOAD_TIMEOUT = 30.0
_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def require_browser() -> None:
    """Fail the test, naming the fix, when Chromium or its driver is not installed."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        pytest.fail(
            f"the browser test needs {' and '.join(missing)}: run `bash scripts/browser` "
            "(installs Debian's chromium and chromium-driver)",
            pytrace=False,
        )


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile in a temporary folder; quit (and the folder removed) on exit."""
    require_browser()
    profile = tempfile.mkdtemp(prefix="soklet-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in _FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
