"""`eoslab serve` in a real headless browser (Debian's chromium): the table the page's JavaScript
draws, sorted and filtered through the URL's hash, a broken run shown as broken, and a shrunk run
beside its original; then a live page driven over the DevTools protocol: a heading clicked, a
filter typed, a run written to the store while the page is open appearing in it. The served HTML
has an empty table body: every row checked here was drawn by the script. Skipped, with the reason,
where chromium is not installed."""
from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from urllib.parse import quote

import pytest

from tests.pipeline.test_serve import (BAD_JSON, BAD_RESULTS, DUP, EXPECTED, LAB, MARKUP, NESTED, NO_HISTORY, OLD,
                                       SCENARIO, SHRUNK, VALID, Server, _meta, build_store, wait_for, write_run)

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (Debian: apt-get install "
                                                         "chromium); the browser tests need a real browser")


class Dom(HTMLParser):
    """The rows of tbody#rows (data-run, verdict, cell texts), #shown, #pair, and sort headers."""

    def __init__(self, html: str):
        super().__init__()
        self.rows: list[dict] = []
        self.texts: dict[str, str] = {}
        self.pair_hidden = None
        self.sorted_by: dict[str, str] = {}
        self._in_rows = False
        self._stack: list[str] = []           # ids of the open elements we collect text for
        self._cell = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tbody" and a.get("id") == "rows":
            self._in_rows = True
        elif tag == "tr" and self._in_rows:
            self.rows.append({"id": a["data-run"], "verdict": a["data-verdict"], "cells": []})
        elif tag == "td" and self._in_rows:
            self.rows[-1]["cells"].append("")
            self._cell = self.rows[-1]["cells"]
        elif tag == "th" and a.get("aria-sort"):
            self.sorted_by[a["data-key"]] = a["aria-sort"]
        if tag in ("td", "th"):
            for name in self._stack:
                if name:
                    self.texts[name] += "|"
        if a.get("id") == "pair":
            self.pair_hidden = "hidden" in a
        if a.get("id") in ("shown", "pair", "summary"):
            self._stack.append(a["id"])
            self.texts[a["id"]] = ""
        elif self._stack and tag not in ("br", "input", "img"):
            self._stack.append("")

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_rows = False
        if tag == "td":
            self._cell = None
        if self._stack and tag not in ("br", "input", "img"):
            self._stack.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[-1] += data
        for name in self._stack:
            if name:
                self.texts[name] += data


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    s = Server(build_store(root), "--refresh", "0")
    s.profile = str(root / "chromium-profile")
    yield s
    s.stop()


def dom(server, fragment: str = "") -> Dom:
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={server.profile}", "--dump-dom", server.url + fragment],
                       capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0 and "<tbody" in r.stdout, r.stderr[-2000:]
    assert "<img" not in r.stdout                          # the folder named as markup stayed text
    return Dom(r.stdout)


def test_the_script_draws_every_run(served):
    d = dom(served)
    assert {r["id"]: r["verdict"] for r in d.rows} == {k: v[0] for k, v in EXPECTED.items()}
    assert d.texts["shown"] == f"{len(EXPECTED)} of {len(EXPECTED)} runs shown"
    assert d.sorted_by == {"id": "ascending"}
    assert d.pair_hidden is True
    cells = {r["id"]: r["cells"] for r in d.rows}
    assert cells[DUP][2] == "confluent-kafka2.6.0 (librdkafka 2.6.0)"           # client and its version
    assert "duplicate ×7" in cells[DUP][9] and "lost-write ×1" in cells[DUP][9]
    assert cells[BAD_JSON][8] == "broken" and "run.json: not valid JSON" in cells[BAD_JSON][9]
    assert cells[NO_HISTORY][9].startswith("no history.jsonl")
    assert "g0 ×1 (unconfirmed)" in cells[LAB][9]
    assert cells[SHRUNK][0] == f"{SHRUNK}shrunk from {DUP} compare"
    assert cells[DUP][0] == f"{DUP}shrunk: {NESTED} compareshrunk: {SHRUNK} compare"
    assert cells[MARKUP][0] == MARKUP and cells[MARKUP][8] == "broken"
    assert cells[VALID][0] == VALID and cells[VALID][10] == "report · results.json · run.json"
    assert cells[LAB][10] == "report · results.json · run.json"                  # analyze's report, linked


@pytest.mark.parametrize("fragment, key, direction", [("#sort=seed&dir=desc", "seed", "descending"),
                                                      ("#sort=verdict", "verdict", "ascending")])
def test_sorting(served, fragment, key, direction):
    d = dom(served, fragment)
    assert len(d.rows) == len(EXPECTED) and d.sorted_by == {key: direction}
    if key == "seed":
        seeds = [-1 if r["cells"][5] == "?" else int(r["cells"][5]) for r in d.rows]
        assert seeds == sorted(seeds, reverse=direction == "descending")
    else:
        rank = ["broken", "lab-error", "anomalies", "unknown", "pending", "valid"]
        order = [rank.index(r["verdict"]) for r in d.rows]
        assert order == sorted(order) and order[0] < order[-1]


@pytest.mark.parametrize("fragment, ids", [
    ("#v=broken", {BAD_JSON, NO_HISTORY, BAD_RESULTS, MARKUP}),
    ("#q=faults:lost-ack", {LAB, OLD, SCENARIO}),
    ("#q=" + quote("kill-leader confluent") + "&v=anomalies", {DUP, SHRUNK, NESTED}),
])
def test_filtering(served, fragment, ids):
    d = dom(served, fragment)
    assert {r["id"] for r in d.rows} == ids
    assert d.texts["shown"] == f"{len(ids)} of {len(EXPECTED)} runs shown"


def test_a_shrunk_run_beside_its_original(served):
    d = dom(served, "#pair=" + quote(SHRUNK, safe=""))
    assert d.pair_hidden is False
    text = d.texts["pair"]
    assert f"|original: {DUP}|shrunk: {SHRUNK}|" in text
    assert "|scheduled faults|5|2|" in text and "|time limit (s)|30|8|" in text and "|processes|4|2|" in text


# -- the live page, driven through the DevTools protocol: clicks, typing, a run appearing ----------

class Page:
    """One headless chromium showing URL, driven over its DevTools websocket (aiohttp's client)."""

    def __init__(self, url: str, profile: str):
        self.proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      "--remote-debugging-port=0", f"--user-data-dir={profile}", url],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.ws_url = self._browser_ws()
        self._n = 0

    def _browser_ws(self) -> str:
        import threading
        found: list[str] = []

        def read():
            for line in self.proc.stderr:
                if "DevTools listening on ws://" in line:
                    found.append(line.split("listening on ", 1)[1].strip())
                    break
            for _ in self.proc.stderr:      # keep draining, so chromium never blocks on a full pipe
                pass
        threading.Thread(target=read, daemon=True).start()
        wait_for(lambda: found or self.proc.poll() is not None, 120, "chromium's DevTools address")
        assert found, f"chromium exited ({self.proc.returncode}) without a DevTools address"
        host = found[0].split("/")[2]
        return wait_for(lambda: self._page_ws(host), 60, "chromium's page target")

    @staticmethod
    def _page_ws(host: str) -> str | None:
        import json
        import urllib.request
        with urllib.request.urlopen(f"http://{host}/json/list", timeout=10) as resp:
            pages = [t for t in json.load(resp) if t.get("type") == "page"]
        return pages[0]["webSocketDebuggerUrl"] if pages else None

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page."""
        import asyncio
        import aiohttp
        self._n += 1
        msg = {"id": self._n, "method": "Runtime.evaluate",
               "params": {"expression": expression, "returnByValue": True}}

        async def go():
            async with aiohttp.ClientSession() as s, s.ws_connect(self.ws_url, max_msg_size=0) as ws:
                await ws.send_json(msg)
                async for m in ws:
                    data = m.json()
                    if data.get("id") == msg["id"]:
                        return data
        data = asyncio.run(asyncio.wait_for(go(), 60))
        result = data["result"]
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def rows(self) -> list[str]:
        return self.eval("[...document.querySelectorAll('#rows tr')].map(tr => tr.dataset.run)")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def live(tmp_path):
    store = build_store(tmp_path)
    server = Server(store, "--refresh", "0.3")
    page = Page(server.url, str(tmp_path / "chromium-profile"))
    yield server, page, store
    page.close()
    server.stop()


def test_clicks_typing_and_a_run_that_appears(live):
    _server, page, store = live
    wait_for(lambda: len(page.rows()) == len(EXPECTED), 60, "the table drawn")
    page.eval("document.querySelector('th[data-key=seed]').click()")
    page.eval("document.querySelector('th[data-key=seed]').click()")            # again: the other way
    seeds = page.eval("[...document.querySelectorAll('#rows tr td:nth-child(6)')].map(td => td.textContent)")
    seeds = [-1 if s == "?" else int(s) for s in seeds]
    assert seeds == sorted(seeds, reverse=True) and seeds[0] > seeds[-1]
    assert page.eval("location.hash") == "#sort=seed&dir=desc"
    page.eval("const q = document.getElementById('q'); q.value = 'faults:kill'; "
              "q.dispatchEvent(new Event('input'))")
    kill = {k for k in EXPECTED if k.startswith("queue/kill-leader/")} | {NO_HISTORY, BAD_RESULTS}
    assert set(page.rows()) == kill
    new = "queue/kill/new/seed-42"
    write_run(store, new, _meta(nemesis=("kill",), seed=42),
              {"verdict": "invalid", "valid": False, "anomalies": {"duplicate": [{}]}})
    wait_for(lambda: new in page.rows(), 30, "the new run in the page")
    assert set(page.rows()) == kill | {new} and page.rows()[0] == new            # filter and sort kept
    page.eval(f"document.querySelector(`tr[data-run='${{CSS.escape({SHRUNK!r})}}'] a[href='#']`).click()")
    assert page.eval("document.getElementById('pair').hidden") is False
    assert f"shrunk: {SHRUNK}" in page.eval("document.getElementById('pair').textContent")
