"""Load a result page in a real browser, offline, and say what a person would see: Debian's headless
Chromium, driven over the DevTools protocol on a pipe (no port, no websocket), with every name lookup
failing and a dead proxy, so a page that needs the network shows it.

    python -m scripts.page_check demo-report.html --screenshot demo-report.png
    python -m scripts.page_check report.html --json

It reports, and exits non-zero on any of them: console errors (script errors, blocked content, failed
loads), requests for anything outside the file (any URL that is not the page itself or a `data:` URI),
images that did not decode, JavaScript dialogs, a page with no text, and a blank screenshot (one
colour). The pages it checks carry no script; a hostile-name test plants `window.__pwned` setters
and reads the flag back here (`pwned`).

The browser: `chromium-headless-shell` (Debian), which `scripts/setup.sh` installs when it runs as root;
`TAPER_CHROMIUM` names another binary.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser")
VIEWPORT = (1200, 900)
MAX_SCREENSHOT_HEIGHT = 6000
LOAD_TIMEOUT_S = 30.0
# Everything that would make Chromium reach out on its own (updates, metrics, name lookups) is off, and
# every host resolves to nothing, so a request from the page fails here as it would on a plane.
OFFLINE_FLAGS = ("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-default-apps", "--disable-domain-reliability",
                 "--metrics-recording-only", "--no-pings")
# Read in the page after load: every image decoded? the page's own text, and the hostile-name flag.
PROBE = """JSON.stringify({
  images: Array.from(document.images).map(i => ({ok: i.complete && i.naturalWidth > 0, src: i.src.slice(0, 40)})),
  text: document.body ? document.body.innerText.length : 0,
  width: document.documentElement.scrollWidth,
  height: document.documentElement.scrollHeight,
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
  scripts: document.scripts.length,
})"""


class BrowserMissing(RuntimeError):
    pass


@dataclass
class PageCheck:
    """What the browser saw. `problems` lists each failure in words (empty: the page is fine)."""

    page: str
    console_errors: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    images: int = 0
    broken_images: list[str] = field(default_factory=list)
    text_chars: int = 0
    scripts: int = 0
    pwned: str | None = None
    page_width: int = 0
    screenshot_colours: int = 0
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        found = [f"console error: {e}" for e in self.console_errors]
        found += [f"request outside the file: {u}" for u in self.outside_requests]
        found += [f"dialog opened: {d}" for d in self.dialogs]
        found += [f"image did not decode: {s}" for s in self.broken_images]
        if self.pwned is not None:
            found.append(f"a script from the page's content ran (window.__pwned = {self.pwned})")
        if self.text_chars == 0:
            found.append("the page has no text")
        if self.screenshot_colours <= 1:
            found.append("the screenshot is blank (one colour)")
        return found


def find_browser() -> str:
    """The Chromium binary to drive; BrowserMissing (with the install command) if there is none."""
    named = os.environ.get("TAPER_CHROMIUM")
    found = named or next((p for p in map(shutil.which, BROWSERS) if p), None)
    if not found:
        raise BrowserMissing("no Chromium found: `apt-get install chromium-headless-shell` "
                             "(scripts/setup.sh does it when run as root), or set TAPER_CHROMIUM")
    return found


class DevTools:
    """The DevTools protocol over --remote-debugging-pipe: JSON messages ended by NUL, commands on the
    browser's fd 3, answers and events on its fd 4."""

    def __init__(self, browser: str, profile: Path):
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser reads commands on fd 3 and writes on fd 4: our pipe ends go there in the child (by
        # way of fds above 10, so neither end is overwritten by the other's move; 3 and 4 stay open).
        def child_fds() -> None:
            import fcntl

            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)
        args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
                "--hide-scrollbars", *OFFLINE_FLAGS, "about:blank"]
        self.process = subprocess.Popen(args, pass_fds=(3, 4, to_browser_r, from_browser_w), preexec_fn=child_fds,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = LOAD_TIMEOUT_S) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = LOAD_TIMEOUT_S) -> dict:
        deadline = time.monotonic() + timeout
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _read(self, deadline: float) -> dict:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("the browser did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed the pipe (it exited)")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        try:
            os.write(self._to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)


def check_page(page: str | os.PathLike, screenshot: str | os.PathLike | None = None,
               hide_photos: bool = False) -> PageCheck:
    """Load `page` (a local HTML file) offline in headless Chromium; what it saw, and the full-page
    screenshot written to `screenshot` (PNG) if given, its photos blanked with `hide_photos` (for a
    screenshot kept in the repository of a page showing photos that are not ours to publish).

    >>> check_page("demo-report.html").problems     # doctest: +SKIP
    []
    """
    path = Path(page).resolve()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="taper-page-check-") as profile:
        tools = DevTools(find_browser(), Path(profile))
        try:
            result = _load_and_probe(tools, path, screenshot, hide_photos)
        finally:
            tools.close()
    result.seconds = round(time.perf_counter() - start, 2)
    return result


def _load_and_probe(tools: DevTools, path: Path, screenshot, hide_photos: bool) -> PageCheck:
    target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = tools.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        tools.send(f"{domain}.enable", session=session)
    tools.send("Emulation.setDeviceMetricsOverride", {"width": VIEWPORT[0], "height": VIEWPORT[1],
                                                      "deviceScaleFactor": 1, "mobile": False}, session=session)
    url = path.as_uri()
    tools.send("Page.navigate", {"url": url}, session=session)
    tools.wait_for("Page.loadEventFired")
    probe = json.loads(tools.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True},
                                  session=session)["result"]["value"])
    if hide_photos:
        tools.send("Runtime.evaluate", {"expression": "document.querySelectorAll('img').forEach("
                                                      "i => i.style.visibility = 'hidden')"}, session=session)
    height = min(max(probe["height"], VIEWPORT[1]), MAX_SCREENSHOT_HEIGHT)
    shot = tools.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                 "clip": {"x": 0, "y": 0, "width": VIEWPORT[0], "height": height,
                                                          "scale": 1}}, session=session)
    png = base64.b64decode(shot["data"])
    if screenshot is not None:
        Path(screenshot).write_bytes(png)
    result = PageCheck(page=str(path), images=len(probe["images"]), text_chars=probe["text"],
                       scripts=probe["scripts"], pwned=probe["pwned"], page_width=probe["width"],
                       screenshot_colours=_colours(png))
    result.broken_images = [i["src"] for i in probe["images"] if not i["ok"]]
    for event in tools.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            result.console_errors.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params["args"]
            result.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            result.console_errors.append(params["entry"]["text"])
        elif method == "Network.requestWillBeSent":
            requested = params["request"]["url"]
            if requested != url and not requested.startswith("data:"):
                result.outside_requests.append(requested[:200])
        elif method == "Page.javascriptDialogOpening":
            result.dialogs.append(params.get("message", "")[:200])
    return result


def _colours(png: bytes) -> int:
    """How many distinct colours the screenshot has (1: a blank page), counted up to 256."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        found = image.convert("RGB").getcolors(maxcolors=256)
    return 257 if found is None else len(found)


def shrink(png: Path, width: int) -> None:
    """Scale the screenshot at `png` to `width` pixels wide, keep its top 1.5 x `width` pixels, and store
    it with a 256-colour palette (a screenshot for the docs, not a pixel-exact one)."""
    from PIL import Image

    with Image.open(png) as image:
        height = round(image.height * width / image.width)
        small = image.convert("RGB").resize((width, height), Image.LANCZOS)
    small = small.crop((0, 0, width, min(height, width * 3 // 2)))
    small.quantize(colors=256, dither=Image.Dither.NONE).save(png, optimize=True)  # a docs image: small, not exact


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("page", type=Path, help="an HTML file")
    parser.add_argument("--screenshot", type=Path, help="write the full-page screenshot here (PNG)")
    parser.add_argument("--hide-photos", action="store_true", help="blank the page's photos in the screenshot")
    parser.add_argument("--width", type=int, help="shrink the screenshot to this width, and cut it at 1.5x that height")
    parser.add_argument("--json", action="store_true", help="print the check as one JSON object")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        print(f"error: {args.page}: no such file", file=sys.stderr)
        return 2
    try:
        result = check_page(args.page, args.screenshot, args.hide_photos)
        if args.screenshot and args.width:
            shrink(args.screenshot, args.width)
    except (BrowserMissing, TimeoutError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**asdict(result), "problems": result.problems}, indent=1))
    else:
        print(f"{result.page}: {result.images} images, {result.text_chars} characters of text, "
              f"{result.screenshot_colours if result.screenshot_colours <= 256 else '256+'} colours on screen, "
              f"{result.seconds:.1f} s")
        print("\n".join(f"  PROBLEM {p}" for p in result.problems) or "  no problems: no console error, no request "
              "outside the file, every image decoded")
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
