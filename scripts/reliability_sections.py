"""Adds the reliability report's sections measured by other commands (issue 49) to
docs/results/reliability.json and .md, each with the command and the result file it came from:

- signed: forged bundles loaded with `trusted_keys` (scripts/fuzz_bundle.py --signed: reliability_signed.json);
- signing_overhead_ms: what signing adds to `sdk.load` (scripts/bench_signing.py: signing.json);
- soak: threads and processes for minutes against serial results (scripts/soak.py: soak.json);
- java, entry_points, real_bundle: written only when their result files exist (java_fuzz.json,
  entry_points.json, reliability_demo.json: scripts/fuzz_bundle.py on the demo's Tiny ImageNet bundle);
- signed_companion: signed ExecuTorch companions read with `trusted_keys`, and the forged ones among them
  (scripts/fuzz_entry_points.py: `companion_signed`, `companion_forged` of entry_points.json and of the
  companion-only run, entry_points_companion.json);
- companion_unsigned: unsigned companions with a program bit flipped and its SHA-256 redone, loaded without
  keys (entry_points.json's `companion_unsigned`, issue 63), with what the probe costs a load
  (scripts/bench_companion_check.py: companion_check.json).

    python -m scripts.reliability_sections            # after any of those commands, or after fuzz_bundle

Run it again after `scripts/fuzz_bundle.py` rewrites reliability.json/.md: the sections live between
markers in the .md, so a rerun replaces them instead of adding a copy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
BEGIN, END = "<!-- sections: scripts/reliability_sections.py -->", "<!-- end of sections -->"


def _load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def sections() -> dict:
    """{section: fields} for every source file that exists."""
    out = {}
    if (signed := _load("reliability_signed")) is not None:
        out["signed"] = {**signed["signed"], "failures": signed["failures"], "source": "reliability_signed.json",
                         "command": signed["command"]}
    if (signing := _load("signing")) is not None:
        out["signing_overhead_ms"] = signing["signing_overhead_ms"]
        out["signing"] = {"overhead_ms": signing["signing_overhead_ms"],
                          "verify_signature_us_median": signing["verify_signature_us_median"],
                          "source": "signing.json", "command": signing["command"]}
    if (soak := _load("soak")) is not None:
        out["soak"] = {k: soak[k] for k in ("seconds", "threads", "processes", "calls", "mismatches", "crashes")}
        out["soak"].update(rss_mb_peak=max(p.get("rss_mb_peak", 0) for p in soak["per_process"]),
                           rss_growth_after_settle_mb=max(p.get("rss_growth_after_settle_mb", 0)
                                                          for p in soak["per_process"]),
                           source="soak.json", command=soak["command"])
    if (java := _load("java_fuzz")) is not None:
        out["java"] = {k: java[k] for k in ("cases", "untyped", "hangs", "crashes", "agreement", "disagreements",
                                            "command")} | {"source": "java_fuzz.json"}
        out["java"].update(python_untyped=java.get("python_untyped", "not measured"),
                           by_version=java.get("by_version", "not measured"))
    if (real := _load("reliability_demo")) is not None:
        out["real_bundle"] = {"cases": real["cases"], "description": real["description"], **real["totals"],
                              "silent_changes": real["silent_changes"], "failures": real["failures"],
                              "accepted_forged_edits": real["accepted_forged_edits"], "source": "reliability_demo.json",
                              "command": real["command"]}
    if (entry := _load("entry_points")) is not None:
        out["entry_points"] = {**entry["entry_points"], "families": entry["families"], "source": "entry_points.json",
                               "command": entry["command"]}
    runs = [(name, r) for name in ("entry_points", "entry_points_companion")
            if (r := _load(name)) is not None and "companion_forged" in r]
    if runs:   # the full run's companion cases and the companion-only run's, added up
        signed = [r["families"].get("companion_signed", {}) for _, r in runs]
        out["signed_companion"] = {
            "cases": sum(sum(s.values()) for s in signed), "typed": sum(s.get("typed", 0) for s in signed),
            "ok": sum(s.get("ok", 0) for s in signed),
            "forged": sum(r["companion_forged"]["cases"] for _, r in runs),
            "forged_loaded": sum(r["companion_forged"]["loaded"] for _, r in runs),
            "failures": sum(r["entry_points"][k] for _, r in runs for k in
                            ("escapes", "hangs", "crashes", "silent_wrong", "partial_files")),
            "source": " + ".join(f"{name}.json" for name, _ in runs),
            "command": " and ".join(r["command"] for _, r in runs)}
    if entry is not None and "companion_unsigned" in entry:
        check = _load("companion_check")
        out["companion_unsigned"] = {
            **{k: entry["companion_unsigned"][k] for k in ("cases", "crashes", "hangs", "silent_wrong", "refused",
                                                           "loaded_and_right")},
            "load_overhead_ms": check["probe_overhead_ms"] if check else "not measured",
            "load_overhead_cached_ms": check["cached_overhead_ms"] if check else "not measured",
            "source": "entry_points.json" + (" + companion_check.json" if check else ""),
            "command": entry["command"] + (f" and {check['command']}" if check else "")}
    return out


# Each section's line in the .md: (title, text formatted with the section's fields).
SUMMARIES = {
    "signed": ("Signed", "{cases} forged bundles checked with `trusted_keys`, {loaded} loaded "
                         "({signature_replayed} with the original signature replayed)"),
    "signing": ("Signing overhead", "{overhead_ms} ms added to `sdk.load` (median); verifying the signature alone "
                                    "{verify_signature_us_median} us"),
    "soak": ("Soak", "{processes} process(es) x {threads} threads for {seconds:.0f} s, {calls} calls: {mismatches} "
                     "mismatches, {crashes} crashes; peak resident {rss_mb_peak} MiB, growth after the first minute "
                     "{rss_growth_after_settle_mb} MiB"),
    "java": ("Java core", "{cases} damaged bundles through both readers: Java untyped {untyped}, hangs {hangs}, "
                          "crashes {crashes}; agreement with Python {agreement:.2%} ({disagreements} disagreements)"),
    "real_bundle": ("A real bundle", "{cases} damaged copies of a Tiny ImageNet bundle (the demo's; description "
                                     "{description!r}): {escape} escapes, {hang} hangs, {crash} crashes, "
                                     "{silent_changes} silent changes; {typed} typed errors, {same} unchanged, "
                                     "{accepted_forged_edits} forged edits the format accepts"),
    "entry_points": ("Entry points", "{cases} hostile cases (images, examples=, adapt/stream=, the ExecuTorch "
                                     "companion, export paths, a bundle changed after load, the CLI): {escapes} "
                                     "escapes, {hangs} hangs, {crashes} crashes, {silent_wrong} silent wrong "
                                     "results, {partial_files} partial files ({typed} typed errors, {ok} accepted "
                                     "and checked)"),
    "companion_unsigned": ("Unsigned ExecuTorch companions", "{cases} with one bit of the program flipped and its "
                                                             "SHA-256 redone, loaded without keys: {crashes} crashes, "
                                                             "{hangs} hangs, {silent_wrong} silent wrong; {refused} "
                                                             "refused, {loaded_and_right} loaded and predicting as "
                                                             "the bundle; the probe adds {load_overhead_ms} ms to the "
                                                             "first load, {load_overhead_cached_ms} ms once known"),
    "signed_companion": ("Signed ExecuTorch companions", "{cases} damaged or pristine signed companions read with "
                                                         "`trusted_keys` ({typed} refused, {ok} accepted and checked), "
                                                         "and {forged} forged ones (the program edited, its SHA-256 "
                                                         "redone, unsigned or signed by another key): {forged_loaded} "
                                                         "loaded; {failures} escapes, hangs, crashes, silent wrong "
                                                         "results or partial files in those runs"),
}


def markdown(found: dict) -> str:
    lines = [BEGIN, "", "## Sections measured by other commands (scripts/reliability_sections.py)", ""]
    for key, (title, text) in SUMMARIES.items():
        if key in found:
            lines.append(f"- **{title}** (`{found[key]['command']}`): " + text.format_map(found[key]) + ".")
    for name in ("java", "entry_points"):
        if name not in found:
            lines.append(f"- **{name}**: not measured yet (no docs/results/"
                         f"{'java_fuzz' if name == 'java' else name}.json).")
    return "\n".join([*lines, "", END])


def main() -> int:
    report_path = RESULTS / "reliability.json"
    report = json.loads(report_path.read_text())
    found = sections()
    report.update(found)
    report_path.write_text(json.dumps(report, indent=1) + "\n")
    md_path = RESULTS / "reliability.md"
    text = md_path.read_text()
    if BEGIN in text:
        text = text[:text.index(BEGIN)].rstrip("\n") + "\n"
    md_path.write_text(text.rstrip("\n") + "\n\n" + markdown(found) + "\n")
    print(json.dumps({k: v for k, v in found.items() if not isinstance(v, dict) or "command" in v}, indent=1)[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
