"""The app run's report.html: verdict, witnesses, one lane per instance, progress and lag, in a browser too."""
import os
import shutil
import subprocess

import pytest

from checker.kafka.app import check_app
from checker.report_app import instance_states, render_app_report, write_app_report
from checker.report_svg import TYPE_COLORS
from tests.checker.test_app_check import Run, S
from tests.checker.test_report_linear import _count, _png_pixels

pytestmark = pytest.mark.fast
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


def eventful():
    """Three instances: 0 paused a while, 1 killed and restarted then replaced by a zombie's successor,
    2 cut off and then exits by itself; a leader killed meanwhile; one value duplicated, one lost."""
    r = Run(keys=4)
    for i in range(3):
        r.app("app-start", instance=i, incarnation=0, pid=100 + i)
    r.t = 1 * S
    for b in range(0, 40, 4):
        r.send(range(b, b + 4), at=r.t + S // 2)
        r.copy(range(b, b + 4) if b != 36 else range(36, 39), at=r.t + S // 4)    # k3:39 never copied
        if b == 8:
            r.nemesis("start-kill-leader", {"node": 2})
            r.app("app-pause", instance=0, incarnation=0)
            r.app("app-exit", instance=1, incarnation=0, pid=101, code=-9, by="lab")
            r.app("app-cut", instance=2, incarnation=0)
        if b == 16:
            r.nemesis("stop-kill-leader", {"node": 2})
            r.app("app-resume", instance=0, incarnation=0)
            r.app("app-start", instance=1, incarnation=1, pid=103)
            r.app("app-uncut", instance=2, incarnation=0)
            r.copy([5])                                                            # a duplicate
        if b == 24:
            r.nemesis("start-zombie-app", {"instance": 1})
            r.app("app-zombie", instance=1, old=1, new=2)
            r.app("app-exit", instance=2, incarnation=0, pid=102, code=3, by="self")
        if b == 32:
            r.app("app-exit", instance=1, incarnation=1, pid=103, code=-9, by="lab")
            r.nemesis("stop-zombie-app", {"instance": 1})
    r.final()
    r.audit()
    return r


def test_the_states_of_each_instance_over_time():
    r = eventful()
    app = [(op["time"], op["f"], op["value"]) for op in r.ops if op["process"] == "app"]
    states = instance_states(app, lambda t: t / S, 100.0)
    assert [st for _, _, st in states[0]] == ["running", "paused", "running"]
    assert [st for _, _, st in states[1]] == ["running", "dead", "running", "zombie", "running"]
    assert [st for _, _, st in states[2]] == ["running", "cut", "running", "dead"]
    assert states[2][-1][1] == 100.0                 # it died by itself: dead to the end


def test_the_page_has_the_verdict_the_anomalies_and_one_lane_per_instance(tmp_path):
    r = eventful()
    res = check_app(r.ops)
    assert set(res["anomalies"]) == {"duplicate", "lost-write"}
    html = render_app_report(res, r.ops, "eventful <copier>")
    assert "INVALID" in html and "eventful &lt;copier&gt;" in html
    for kind in ("duplicate", "lost-write"):
        assert f"<th id='{kind}'>{kind}</th>" in html
    lanes = html.split("<h2>App instances</h2>", 1)[1].split("<h2>", 1)[0]
    assert [f">instance {i}</text>" in lanes for i in range(4)] == [True, True, True, False]
    assert "kill-leader" in lanes and "zombie-app" not in lanes       # cluster faults shaded, app ones are states
    assert "i2 exit 3" in lanes
    assert "<h2>Progress</h2>" in html and "<h2>Lag</h2>" in html and html.count("<polyline") >= 3
    assert "<script" not in html.lower()
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    write_app_report(str(tmp_path / "report.html"), res, r.ops)
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_a_valid_run_without_output_or_history_still_renders():
    r = Run()
    r.send([0], outcome="info")
    r.send([1])
    r.final({})
    res = check_app(r.ops)
    html = render_app_report(res, None, "empty")
    assert "never saw a record" in html and "<h2>App instances</h2>" not in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
def test_the_report_renders_in_headless_chromium(tmp_path):
    r = eventful()
    page = tmp_path / "report.html"
    write_app_report(str(page), check_app(r.ops), r.ops, "eventful")
    shot = tmp_path / "shot.png"
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,2400", f"--screenshot={shot}",
            page.as_uri()]
    out = subprocess.run(args, check=False, capture_output=True, text=True, timeout=120)
    assert shot.exists(), out.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    w, h, rows = _png_pixels(shot)
    assert (w, h) == (1000, 2400)
    assert _count(rows, TYPE_COLORS["ok"]) > 2000        # the running spans
    assert _count(rows, TYPE_COLORS["info"]) > 100       # the pause
    assert _count(rows, TYPE_COLORS["fail"]) > 100       # the dead stretches, the verdict's anomalies
