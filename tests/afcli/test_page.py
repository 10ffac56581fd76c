"""The page ``af export --html`` writes, in a real browser: headless Chromium (Debian's
package, driven through chromedriver) loads it from localhost and from a file, the calls
and their three slots render and navigate, no request leaves the page, and hostile text
from a model, a tool or a user changes nothing.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, define_tool, mock
from tests.afcli.conftest import Invoke
from tests.conftest import fixed_recording

SAMPLES = Path(__file__).resolve().parents[2] / "recordings"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

HOSTILE = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    '<a href="javascript:window.__pwned = 3">click me</a>',
    "</script><script>window.__pwned = 4</script>",
    "<!-- <script>window.__pwned = 5</script>",
    '"><svg onload="window.__pwned = 6">',
    "<style>body{display:none}</style>",
    '<link rel="stylesheet" href="http://127.0.0.1:9/x.css">',
    "\x1b[31mred\x1b[0m [bold red]markup[/] \u2028line\u2029sep {{7*7}}",
]


def _need_browser() -> None:
    if os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER):
        return
    message = (
        "Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)"
    )
    if os.environ.get("AF_REQUIRE_BROWSER"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # The flags that keep Chromium from reaching out on its own (this machine has no
    # network beyond its package registries, and the test wants to see only the page's).
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


class _Server:
    """A localhost server for one folder, counting every request it gets."""

    def __init__(self, folder: Path) -> None:
        seen: list[str] = []
        self.requests = seen

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(folder), **kwargs)

            def do_GET(self) -> None:  # noqa: N802 - the http.server's name
                seen.append(self.path)
                super().do_GET()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[_Server]:
    server = _Server(tmp_path)
    try:
        yield server
    finally:
        server.close()


def _load(browser: Any, url: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("performance")  # what earlier pages left
    browser.get(url)
    WebDriverWait(browser, 20).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == "1"
    )


_BROWSERS_OWN = ("chrome://", "chrome-untrusted://", "devtools://", "chrome-extension://")
"""Chromium's own pages (a new tab's resources), which are not the page's requests."""


def _requested(browser: Any) -> list[str]:
    """Every URL the page asked for since it was loaded (from the DevTools log)."""
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            params = message["params"]
            url = str(params["request"]["url"])
            if str(params.get("documentURL", "")).startswith(_BROWSERS_OWN) or url.startswith(
                _BROWSERS_OWN
            ):
                continue  # a page cannot load these: they are the browser's own
            urls.append(url)
    return urls


def _text(browser: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def _count(browser: Any, css: str) -> int:
    from selenium.webdriver.common.by import By

    return len(browser.find_elements(By.CSS_SELECTOR, css))


def test_the_page_shows_every_call_and_its_slots_and_navigates_offline(
    browser: Any, serve: _Server, tmp_path: Path, invoke: Invoke
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page = tmp_path / "page.html"
    ran = invoke("export", SAMPLES / "sample-compaction.jsonl", "--html", page)
    assert ran.code == 0, ran.err
    url = f"http://127.0.0.1:{serve.port}/page.html"
    _load(browser, url)

    assert serve.requests == ["/page.html"]
    assert [u for u in _requested(browser) if u != url] == []
    assert "sample-compaction" in _text(browser, "h1")
    assert _count(browser, "#chips li") == 14
    assert _text(browser, "#where") == "call 1 of 14"
    assert _count(browser, "#slot-system .entry") == 1
    assert _count(browser, "#slot-tools .entry") == 3
    assert _count(browser, "#slot-messages .entry") == 1
    assert "battery cell supplier" in _text(browser, "#slot-messages")

    browser.find_element(By.ID, "next").click()
    assert _text(browser, "#where") == "call 2 of 14"
    assert _count(browser, "#slot-messages .entry") == 3
    assert _count(browser, "#slot-messages .new") == 2  # the reply and the tool result

    # Call 9 is sent after the first fold: a seam and the summary in its window.
    browser.find_element(By.CSS_SELECTOR, "#chips li:nth-child(9)").click()
    assert _text(browser, "#where") == "call 9 of 14"
    assert "fold" in _text(browser, "#slot-messages .seam")
    assert "summarize_oldest" in _text(browser, "#slot-messages")
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    assert _text(browser, "#where") == "call 10 of 14"
    assert "stop" in _text(browser, "#response")
    assert "answer" in _text(browser, ".why h2")
    assert browser.execute_script("return location.hash") == "#call-10"

    # Nothing was asked of the network by the navigation either, and the policy held.
    assert serve.requests == ["/page.html"]
    assert [u for u in _requested(browser) if u != url] == []
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


@pytest.fixture
def hostile_run(tmp_path: Path) -> Path:
    hostile = "\n".join(HOSTILE)
    agent = (
        Agent.create(
            provider=mock(
                replies=[
                    {
                        "content": f"Checking. {HOSTILE[1]}",
                        "tool_calls": [{"id": "c1", "name": "page", "args": {"q": HOSTILE[0]}}],
                    },
                    f"Done: {hostile}",
                ]
            ),
            model="mock-hostile",
            name="hostile",
            record=fixed_recording(tmp_path, "hostile-run"),
        )
        .system(f"Be careful. {HOSTILE[3]}")
        .tool(
            define_tool(
                "page",
                f"Fetch a page. {HOSTILE[2]}",
                {"type": "object", "properties": {"q": {"type": "string"}}},
                lambda args, ctx: hostile,
            )
        )
        .build()
    )
    agent.run(f"Look at this: {hostile}")
    assert agent.last_recording is not None
    return agent.last_recording


def test_hostile_text_from_a_model_a_tool_and_a_user_stays_text(
    browser: Any, serve: _Server, tmp_path: Path, invoke: Invoke, hostile_run: Path
) -> None:
    from selenium.webdriver.common.by import By

    page = tmp_path / "page.html"
    ran = invoke("export", hostile_run, "--html", page)
    assert ran.code == 0, ran.err
    raw = page.read_text()
    assert raw.count("<script") == 2  # the data block and the page's own script
    assert "window.__pwned" in raw  # the data is there, as inert JSON
    url = f"http://127.0.0.1:{serve.port}/page.html"
    for where in (url, page.as_uri()):
        _load(browser, where)
        for i in range(2):
            browser.find_element(By.CSS_SELECTOR, f"#chips li:nth-child({i + 1})").click()
            assert browser.execute_script("return window.__pwned") is None
            assert _count(browser, "img, svg, iframe, a, link, object, embed") == 0
            assert _count(browser, "script") == 2
            assert _count(browser, "style") == 1
            assert browser.find_element(By.TAG_NAME, "body").is_displayed()
        # Every hostile sample is on the page, as text.
        shown = browser.execute_script("return document.body.textContent")
        for sample in HOSTILE[:8]:
            assert sample in shown, sample
        assert "\\x1b[31mred\\x1b[0m [bold red]markup[/]" in shown  # spelled out
    assert serve.requests == ["/page.html"]
    assert [u for u in _requested(browser) if not u.startswith(("http://127.0.0.1", "file:"))] == []


def test_inert_json_cannot_close_its_block() -> None:
    from afcli.page import inert_json

    text = inert_json({"x": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"x": "</script><!-- & \u2028"}


def test_the_page_names_nothing_outside_itself(tmp_path: Path, invoke: Invoke) -> None:
    page = tmp_path / "p.html"
    assert invoke("export", SAMPLES / "sample-trip.jsonl", "--html", page).code == 0
    raw = page.read_text()
    assert re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", raw) is None
    assert "@import" not in raw and "url(" not in raw
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', raw)
    assert csp is not None and "default-src 'none'" in csp.group(1)
    assert "connect-src 'none'" in csp.group(1)


def test_a_page_too_large_says_so_and_offers_calls(tmp_path: Path, invoke: Invoke) -> None:
    from afcli.page import PageTooLarge, write_page

    with pytest.raises(PageTooLarge, match=r"--calls 1-\d+"):
        write_page(SAMPLES / "sample-sliding.jsonl", tmp_path / "x.html", limit=20_000)
    assert not (tmp_path / "x.html").exists()
    part = write_page(SAMPLES / "sample-sliding.jsonl", tmp_path / "y.html", calls=(2, 3))
    data = part.read_text()
    assert '"shown":[2,3]' in data
    ran = invoke(
        "export", SAMPLES / "sample-trip.jsonl", "--html", tmp_path / "z.html", "--calls", "40-50"
    )
    assert ran.code == 1 and "no calls in 40-50" in ran.err


@pytest.mark.parametrize(("calls", "shown"), [("2", [2]), ("2-3", [2, 3]), ("4-99", [4, 5])])
def test_calls_takes_a_range_or_one_number(
    tmp_path: Path, invoke: Invoke, calls: str, shown: list[int]
) -> None:
    from afcli.page import page_data

    page = tmp_path / "p.html"
    ran = invoke("export", SAMPLES / "sample-trip.jsonl", "--html", page, "--calls", calls)
    assert ran.code == 0, ran.err
    data = page_data(SAMPLES / "sample-trip.jsonl", calls=(shown[0], shown[-1]))
    assert [c["call"] for c in data["calls"]] == shown
    assert f'"shown":[{shown[0]},{shown[-1]}]' in page.read_text()
    assert [int(n) for n in re.findall(r'"call":(\d+),', page.read_text())] == shown


@pytest.mark.parametrize(
    ("calls", "said"),
    [("9", "no call 9: the run has calls 1 to 5"), ("0", "numbered from 1"), ("x", "A-B")],
)
def test_calls_out_of_the_run_says_so(
    tmp_path: Path, invoke: Invoke, calls: str, said: str
) -> None:
    page = tmp_path / "p.html"
    ran = invoke("export", SAMPLES / "sample-trip.jsonl", "--html", page, "--calls", calls)
    assert ran.code != 0 and said in ran.err and not page.exists()


def test_the_page_grows_linearly_with_the_content() -> None:
    """Each message is stored once, not once per call that sent it."""
    from afcli.page import page_data

    data = page_data(SAMPLES / "sample-sliding.jsonl")
    sent = sum(len(c["messages"] or []) for c in data["calls"])
    assert len(data["messages"]) < sent
    assert all(isinstance(n, int) for c in data["calls"] for n in c["messages"] or [])
