"""A headless Debian chromium driven by selenium through the system chromedriver, for web UI tests.

Never a downloaded browser or driver: the paths are given explicitly, so selenium's own driver
manager never runs (``SE_OFFLINE`` makes sure). Where the two Debian packages are missing
(``.ci/run`` installs them with apt) the tests skip and say so.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser")
MISSING = (
    "needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver; "
    ".ci/run installs them when apt can)"
)


def find_browser() -> tuple[str, str] | None:
    """``(chromium, chromedriver)`` paths from PATH, or None."""
    browser = next((p for n in CHROMIUM_NAMES if (p := shutil.which(n))), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def open_browser(width: int = 1400, height: int = 1900) -> Iterator[Any]:
    """A headless chromium session; quits on exit (one per test)."""
    found = find_browser()
    if found is None:
        pytest.skip(MISSING)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # selenium manager must never fetch anything
    browser, driver_path = found
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    args = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu")
    for arg in (*args, f"--window-size={width},{height}", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def displayed(driver: Any, by: str, what: str, timeout_s: float = 15.0) -> Any:
    """The element once the page has rendered it visibly (React draws after the load event);
    one home for every browser test that waits on the page, so they all wait the same way."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [e for e in driver.find_elements(by, what) if e.is_displayed()]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"{what} not shown in {timeout_s:.0f} s"
        time.sleep(0.1)


def screenshot(driver: Any, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    return path
