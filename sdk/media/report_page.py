"""Result pages a person can look at: one self-contained HTML file per report, photos inlined as
`data:` JPEGs, no script, no font or style from anywhere else, so it opens offline and can be mailed.

Everything shown comes from a user or a bundle (class names, descriptions, file names) and is
untrusted: each piece of text is HTML-escaped, wrapped in <bdi> (a right-to-left mark in one name
cannot reorder its neighbours) and cut to MAX_SHOWN_CHARS (the whole text stays in the element's
title). The page's Content-Security-Policy forbids scripts and every request, so a mistake in escaping
would still run nothing and fetch nothing (scripts/page_check.py then reports the blocked content).
A right or wrong prediction is told by a word and a symbol, not by colour alone.

>>> from sdk.media.report_page import Section, Tile, render_page
>>> html = render_page("My photos", ["3 photos"], [Section("insects", facts=[("classes", "2")])])
>>> "<bdi>insects</bdi>" in html and "<script" not in html
True
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from sdk.media.files import atomic_file

MAX_SHOWN_CHARS = 160      # a name, a title, a caption
LONG_TEXT_CHARS = 1000     # a sentence: the summary, a fact's value, how a description was read
THUMBNAIL_PX = 112
BIDI_CONTROL_CHARS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
BIDI_CONTROLS = {ord(c): f"[U+{ord(c):04X}]" for c in BIDI_CONTROL_CHARS}
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
STYLE = """
body { font: 15px/1.45 "DejaVu Sans", system-ui, sans-serif; margin: 24px auto; max-width: 1120px; color: #1c1c1c;
       padding: 0 16px; }
h1 { font-size: 24px; margin: 0 0 8px; } h2 { font-size: 19px; margin: 28px 0 6px; }
.summary { background: #f1f4f8; border-left: 4px solid #3d6fb4; padding: 10px 14px; margin: 12px 0 20px; }
.summary p { margin: 4px 0; }
dl { display: grid; grid-template-columns: fit-content(35%) minmax(0, 1fr); gap: 2px 14px; margin: 6px 0 10px; }
dt { color: #555; } dd { margin: 0; }
table { border-collapse: collapse; margin: 6px 0 10px; }
th, td { border-bottom: 1px solid #ccc; padding: 3px 10px; text-align: left; vertical-align: top; }
td:nth-child(n+2) { font-variant-numeric: tabular-nums; }
ul.reading { margin: 4px 0 10px; padding-left: 20px; }
.missing { font-weight: bold; }
.badge { border: 1px solid #444; border-radius: 3px; padding: 0 4px; font-size: 12px; margin-right: 4px; }
.strip { display: flex; flex-wrap: wrap; gap: 10px; }
figure { margin: 0; width: 132px; border: 2px solid #bbb; padding: 4px; border-radius: 4px; }
figure.right { border-color: #2e7d32; } figure.wrong { border-color: #c62828; border-style: dashed; }
figure img { width: 124px; height: 124px; object-fit: cover; display: block; background: #eee; }
figcaption { font-size: 12px; line-height: 1.3; margin-top: 3px; }
figcaption .verdict { font-weight: bold; display: block; }
* { overflow-wrap: anywhere; }
"""


@dataclass(frozen=True)
class Tile:
    """One photo on a page: its thumbnail (`thumbnail_uri`), caption lines (plain text), and, where the
    true label is known, whether the prediction was "right" or "wrong"."""

    image_uri: str
    lines: Sequence[str]
    verdict: str | None = None


@dataclass(frozen=True)
class Section:
    """One block of a page: a heading, facts (label, value), how a description was read (each line
    (text, is_missing)), a table (its header row first), and photos."""

    title: str
    facts: Sequence[tuple[str, str]] = ()
    reading: Sequence[tuple[str, bool]] = ()
    tiles: Sequence[Tile] = field(default_factory=tuple)
    table: Sequence[Sequence[str]] = ()


def text(value: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """`value` as escaped HTML text, isolated for bidirectional display and cut to `limit` characters.

    >>> text('<script>alert("x")</script>')
    '<bdi>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</bdi>'
    """
    raw = _printable(str(value))
    if len(raw) <= limit:
        return f"<bdi>{html.escape(raw)}</bdi>"
    return f'<bdi title="{html.escape(raw)}">{html.escape(raw[:limit])}…</bdi>'


# C0 controls, DEL and C1 controls: a terminal acts on them (an escape sequence moves the cursor, clears the
# screen or sets the window's title) instead of showing them.
TERMINAL_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def terminal_text(value: object) -> str:
    """`value` as a terminal may print it: what the pages escape (bidirectional controls as [U+202E], lone
    surrogates as backslash escapes) and every control character as \\xNN, newlines and tabs too (a name
    is one line). Every CLI prints file, class and folder names and descriptions through it.

    >>> print(terminal_text("evil\u202egnp.exe \x1b[2J"))
    evil[U+202E]gnp.exe \x1b[2J
    """
    raw = _printable(str(value))
    return raw.translate(TERMINAL_CONTROLS) if any(ord(c) in TERMINAL_CONTROLS for c in raw) else raw


def _printable(raw: str) -> str:
    """`raw` with what cannot be shown honestly written out: lone surrogates (a file name that is not
    UTF-8, as Python holds it) as backslash escapes, since they cannot be encoded into the page, and
    bidirectional controls as [U+202E], since an override would show "evil\u202egnp.exe" as a .png."""
    if any("\ud800" <= c <= "\udfff" for c in raw):
        raw = raw.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.translate(BIDI_CONTROLS) if any(c in raw for c in BIDI_CONTROL_CHARS) else raw


def thumbnail_uri(image: Image.Image | np.ndarray, size: int = THUMBNAIL_PX) -> str:
    """A `data:` URI of `image` (PIL, or uint8 [H, W, 3]) as a JPEG whose longer side is at most `size`."""
    picture = Image.fromarray(np.ascontiguousarray(image)) if isinstance(image, np.ndarray) else image
    picture = picture.convert("RGB")
    picture.thumbnail((size, size))
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def render_page(title: str, summary: Sequence[str], sections: Sequence[Section], footer: str = "") -> str:
    """The whole page as one HTML string (see the module docstring for what is escaped and why)."""
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(_printable(title)[:MAX_SHOWN_CHARS])}</title>", f"<style>{STYLE}</style>",
             "</head><body>", f"<h1>{text(title)}</h1>"]
    if summary:
        lines = "".join(f"<p>{text(line, LONG_TEXT_CHARS)}</p>" for line in summary)
        parts.append(f'<div class="summary">{lines}</div>')
    parts += [_section(s) for s in sections]
    if footer:
        parts.append(f"<p><small>{text(footer)}</small></p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _section(section: Section) -> str:
    parts = [f"<section><h2>{text(section.title)}</h2>"]
    if section.facts:
        facts = "".join(f"<dt>{text(k)}</dt><dd>{text(v, LONG_TEXT_CHARS)}</dd>" for k, v in section.facts)
        parts.append(f"<dl>{facts}</dl>")
    if section.reading:
        parts.append('<ul class="reading">' + "".join(
            f'<li class="missing"><span class="badge">⚠ MISSING</span>{text(line, LONG_TEXT_CHARS)}</li>'
            if missing else f"<li>{text(line, LONG_TEXT_CHARS)}</li>" for line, missing in section.reading) + "</ul>")
    if section.table:
        head, *rows = section.table
        parts.append("<table><thead><tr>" + "".join(f"<th>{text(h)}</th>" for h in head) + "</tr></thead><tbody>"
                     + "".join("<tr>" + "".join(f"<td>{text(c)}</td>" for c in row) + "</tr>" for row in rows)
                     + "</tbody></table>")
    if section.tiles:
        parts.append('<div class="strip">' + "".join(map(_tile, section.tiles)) + "</div>")
    parts.append("</section>")
    return "".join(parts)


def _tile(tile: Tile) -> str:
    verdict = {"right": "✓ right", "wrong": "✗ wrong"}.get(tile.verdict or "")
    css = f' class="{tile.verdict}"' if verdict else ""
    caption = (f'<span class="verdict">{verdict}</span>' if verdict else "") + "<br>".join(map(text, tile.lines))
    alt = html.escape(_printable(" / ".join(tile.lines))[:MAX_SHOWN_CHARS], quote=True)
    return f'<figure{css}><img src="{html.escape(tile.image_uri, quote=True)}" alt="{alt}"><figcaption>{caption}' \
           "</figcaption></figure>"


def write_page(path: str | os.PathLike, page: str) -> Path:
    """Write `page` to `path` whole or not at all (`sdk.media.files.atomic_file`); the path written."""
    with atomic_file(path) as f:
        f.write(page.encode("utf-8"))
    return Path(path)


def cpu_name() -> str:
    """The processor's model name (Linux: /proc/cpuinfo), else the platform's machine type: timings
    depend on it, so every page that shows a timing names it."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.machine() or 'unknown CPU'}, {os.cpu_count()} cores"
