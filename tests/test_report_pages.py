"""Result pages a person looks at, checked the way a person would see them: loaded offline in headless
Chromium (scripts/page_check.py), which must show no console error, no request outside the file, every
photo decoded, a non-blank render, and no script from a class, description or file name running."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image

from scripts import page_check
from sdk.media.report_page import Section, Tile, render_page, text, thumbnail_uri, write_page

try:
    page_check.find_browser()
    BROWSER = None
except page_check.BrowserMissing as e:
    BROWSER = str(e)
# scripts/setup.sh installs the browser where it can (as root, as in CI): there, its absence is a failure.
needs_browser = pytest.mark.skipif(BROWSER is not None and not os.environ.get("CI"), reason=str(BROWSER))

PWN = "window.__pwned = 1"
HOSTILE = [
    f"<script>{PWN}</script>",
    f'"><img src=x onerror="{PWN}">',
    f"'><svg onload='{PWN}'>",
    "</style><style>body{display:none}</style>",
    '<meta http-equiv="refresh" content="0;url=https://example.com/">',
    f'<a href="javascript:{PWN}">click</a>',
    "\u202egnp.exe",                     # a right-to-left override: shows 'exe.png' unless made visible
    "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 & <b>",  # right-to-left scripts, entities
    "x" * 10_000,
    "\udcff not utf-8",                 # a file name that is not UTF-8, as Python holds it
]


def _hostile_page() -> str:
    dot = thumbnail_uri(np.full((8, 8, 3), 200, np.uint8))
    tiles = [Tile(dot, [name, f"predicted: {name}"], verdict) for name, verdict in
             zip(HOSTILE, ["right", "wrong"] * len(HOSTILE), strict=False)]
    return render_page(HOSTILE[0], HOSTILE[:3], [Section(name, facts=[(name, name)], reading=[(name, True)],
                                                          tiles=tiles[:2]) for name in HOSTILE] +
                       [Section("photos", tiles=tiles)], footer=HOSTILE[1])


@needs_browser
def test_the_checker_sees_what_a_broken_page_does(tmp_path):
    """The harness itself can fail: a script, an outside image and a console error are each reported."""
    page = tmp_path / "broken.html"
    page.write_text(f'<!doctype html><body><p>hi</p><img src="https://example.com/a.png">'
                    f'<script>{PWN}; console.error("boom")</script></body>')
    found = "\n".join(page_check.check_page(page).problems)
    for expected in ("console error: boom", "request outside the file: https://example.com/a.png",
                     "image did not decode", "a script from the page's content ran"):
        assert expected in found
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><body></body>")
    problems = set(page_check.check_page(blank).problems)
    assert {"the page has no text", "the screenshot is blank (one colour)"} <= problems


@needs_browser
@pytest.mark.parametrize("with_policy", [True, False], ids=["as written", "without its content policy"])
def test_hostile_names_execute_nothing_and_the_page_stays_readable(tmp_path, with_policy):
    """Escaping alone must hold: the same page with its Content-Security-Policy removed runs nothing either."""
    html = _hostile_page()
    if not with_policy:
        html = html.replace('<meta http-equiv="Content-Security-Policy"', '<meta name="removed"')
    page = write_page(tmp_path / "hostile.html", html)
    seen = page_check.check_page(page, tmp_path / "hostile.png")
    assert seen.problems == [] and seen.pwned is None and seen.dialogs == [] and seen.scripts == 0
    assert seen.page_width <= page_check.VIEWPORT[0]      # a 10,000-character name wraps or is cut, no sideways scroll
    assert seen.images == 2 * len(HOSTILE) + len(HOSTILE)
    assert "[U+202E]gnp.exe" in html and "\\udcff not utf-8" in html and "<script" not in html


def test_text_is_escaped_cut_and_isolated():
    assert text("<b>") == "<bdi>&lt;b&gt;</bdi>"
    long = text("y" * 10_000)
    assert long.count("y") == 10_000 + 160 and long.endswith("…</bdi>")  # the whole name in the title only
    assert text("a\u202eb") == "<bdi>a[U+202E]b</bdi>"


@needs_browser
def test_the_contact_sheet_shows_every_photo_least_confident_first(tiny_bundle, synthetic_root, tmp_path, capsys):
    from sdk.__main__ import main

    photos = tmp_path / "photos"
    photos.mkdir()
    sources = sorted((synthetic_root / "val").glob("*/*.png"))[:10]
    for p in sources:
        shutil.copy(p, photos / p.name)
    shutil.copy(sources[0], photos / f'<img src=x onerror="{PWN}">.png')
    report = tmp_path / "out" / "sheet.html"
    assert main(["personalize", str(tiny_bundle), "round shapes", "--images", str(photos), "--report", str(report),
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["report"] == str(report)
    html = report.read_text()
    order = sorted(result["predictions"], key=lambda p: p["probability"])
    positions = [html.index(f"probability {p['probability']:.2f}") for p in (order[0], order[-1])]
    assert positions[0] < positions[1]                       # the least confident first
    seen = page_check.check_page(report, tmp_path / "sheet.png")
    assert seen.problems == [] and seen.images == len(sources) + 1


def test_report_needs_images_and_a_writable_place(tiny_bundle, tmp_path, capsys):
    from sdk.__main__ import main

    with pytest.raises(SystemExit):
        main(["personalize", str(tiny_bundle), "round shapes", "--report", str(tmp_path / "x.html")])
    assert "--report needs --images" in capsys.readouterr().err
    folder = tmp_path / "a-folder.html"
    folder.mkdir()
    photo = tmp_path / "p.png"
    Image.fromarray(np.zeros((40, 30, 3), np.uint8)).save(photo)
    assert main(["personalize", str(tiny_bundle), "round shapes", "--images", str(photo), "--report",
                 str(folder)]) == 2
    assert "is a folder: not replacing it" in capsys.readouterr().err and folder.is_dir()


@needs_browser
def test_the_demo_page_marks_missing_items_and_right_and_wrong(tiny_sdk, tiny_data, tiny_run, tmp_path):
    from scripts import demo

    index = {w: i for i, w in enumerate(tiny_data.wnids)}
    outcomes = [demo.personalize_and_score(tiny_sdk, d, tiny_data, index, tiny_run)
                for d in ("round shapes", "red disc, owl", "tuesday")]
    assert outcomes[0].baseline is not None and outcomes[2].error   # "tuesday" names nothing: said, not scored
    closing = demo.summary([(o.accuracy, o.baseline) for o in outcomes if not o.error], 1)
    page = write_page(tmp_path / "demo-report.html", demo.report_page(outcomes, closing, "tiny.taper"))
    html = page.read_text()
    assert "⚠ MISSING" in html and ("✓ right" in html or "✗ wrong" in html)
    assert html.index('class="summary"') < html.index("<h2>") and "bove classifier selection on" in html  # on top
    seen = page_check.check_page(page, tmp_path / "demo.png")
    assert seen.problems == [] and seen.images == sum(len(o.tiles) for o in outcomes) > 0
