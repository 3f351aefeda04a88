"""The demo's closing lines: it says plainly when the personalized model lost, and prints the longer runs'
measured figures (read from docs/results, not typed into the script) beside its own."""

import json
from pathlib import Path

from scripts import demo as demo_module

ROOT = Path(__file__).resolve().parents[1]


def test_losing_demo_says_so_and_shows_the_bench_figures():
    demo = demo_module
    lines = demo.summary([(50.0, 52.0), (40.0, 45.0), (61.0, 60.0)], 4)
    assert lines[0].startswith("personalized above classifier selection on 1 of 3 descriptions")
    assert "(mean difference -2.0 points)" in lines[0]
    assert "At 4 epochs of stage 1 the personalized model does NOT beat classifier selection" in lines[1]
    bench = json.loads((ROOT / "docs/results/bench.json").read_text())["accuracy"]
    assert any(f"TAPER {bench['taper']:.2f}, classifier selection {bench['classifier_selection']:.2f}" in line
               for line in lines)
    full = json.loads((ROOT / "docs/results/bench_w1_h200.json").read_text())["accuracy"]
    assert any(line.startswith("bench preset at full width") and f"stage-1 network {full['stage1_selection']:.2f}"
               in line for line in lines)


def test_winning_demo_does_not_print_the_warning():
    lines = demo_module.summary([(60.0, 52.0), (50.0, 45.0), (59.0, 60.0)], 4)
    assert "2 of 3" in lines[0]
    assert not any("NOT" in line for line in lines)


def test_bench_figures_are_read_from_the_results_folder(tmp_path):
    demo = demo_module
    assert demo.bench_figures(tmp_path) == []  # nothing measured there: nothing printed
    headroom = {"stage3_seeds": {"taper": [58.0, 58.2], "taper_minus_cs": [1.3, 1.5], "mean": 58.1}}
    (tmp_path / "headroom.json").write_text(json.dumps(headroom))
    (line,) = demo.bench_figures(tmp_path)
    assert "TAPER 58.10 over 2 stage-3 seeds" in line and "+1.30, +1.50" in line
