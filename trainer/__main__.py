"""Trainer CLI.

    python -m trainer run --preset bench --data ../shared/data/tiny-imagenet-200.tar.gz --out runs/bench
    python -m trainer run --preset paper --out runs/paper --device cuda      # on a GPU (trainer/device.py)
    python -m trainer prepare --preset paper-b512 --out runs/paper-b512      # config + class embeddings only
    python -m trainer run --preset tiny --out runs/tiny --set stage1_epochs=5
    python -m trainer run --preset demo --data my-photos --init tiny-imagenet.taper --out runs/mine
    python -m trainer eval runs/bench
    python -m trainer run --preset bench --out runs/s2 --reuse-from runs/bench --set stage2_epochs=10 --until stage2
    python -m trainer cache --data ../shared/data/tiny-imagenet-200.tar.gz
    python -m trainer cache list                                              # or: cache clear
    python -m trainer vocabulary --data my-photos        # a starter my-photos/vocabulary.toml to edit
    python -m trainer vocabulary --data ../shared/data/tiny-imagenet-200.tar.gz --out tiny.toml   # WordNet's, converted
    python -m trainer throughput --width 0.5 0.25 --size 64
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sdk.media.report_page import terminal_text

from .config import PRESETS
from .data.errors import DataError
from .device import TrainDevice
from .rundir import RunDir


def write_vocabulary(data: Path, out: Path | None) -> None:
    """A starter vocabulary.toml for an ImageFolder's class folders, or a Tiny ImageNet source's WordNet files
    converted (trainer/data/wordnet.py); written whole or not at all, never over an existing file."""
    from .data.sources import open_source
    from .data.vocabulary import VOCABULARY_FILE, Vocabulary, starter_text

    target = out or (data / VOCABULARY_FILE if data.is_dir() else None)
    if target is None:
        raise DataError(f"{data} is an archive: say where to write with --out")
    if target.exists():
        raise DataError(f"{target} exists: edit it (this command never overwrites)")
    if data.is_dir() and (data / "train").is_dir() and not (data / "wnids.txt").exists():
        ids = sorted(p.name for p in (data / "train").iterdir() if p.is_dir() and not p.name.startswith("."))
        senses = starter_senses(ids)
        text, what = starter_text(ids, senses), "add aliases and groups (docs/training.md)"
        if senses is not None:
            found = sum(bool(v) for v in senses.values())
            what += f"; check the WordNet senses listed for {found} of {len(ids)} classes"
        Vocabulary.from_text(text, ids, str(target))   # what is written always loads
    else:
        source = open_source(data)
        if VOCABULARY_FILE not in source.extra_files:
            raise DataError(f"{data}: no train/ folder and no WordNet files to convert")
        text, ids = source.extra_files[VOCABULARY_FILE].decode(), source.wnids
        what = "WordNet's words converted; put it beside the data as vocabulary.toml to use your edits"
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)
    print(f"wrote {target} ({len(ids)} classes): {what}")


def starter_senses(class_ids: list[str]) -> dict[str, list[tuple[str, str]]] | None:
    """The WordNet senses of each class folder's name (trainer/data/english.py, at most MAX_SENSES, most used
    first), as (id, "name: gloss"); None, and a note, where WordNet's files are not installed."""
    from .data.english import MAX_SENSES, WordNet
    from .data.vocabulary import folder_names

    try:
        wordnet = WordNet()
    except DataError as e:
        print(f"note: no WordNet senses in the starter: {e}")
        return None
    out = {}
    for c, name in folder_names(class_ids).items():
        found = [wordnet.synset(s) for s in wordnet.name_senses(name)[0][:MAX_SENSES]]
        out[c] = [(s.id, f"{s.names[0]}: {s.gloss}") for s in found]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    cache = sub.add_parser("cache", help="build (or reuse) the decoded uint8 cache of a data set, or list or "
                           "clear the caches")
    cache.add_argument("action", nargs="?", choices=("build", "list", "clear"), default="build")
    cache.add_argument("--data", default=None, help="Tiny ImageNet .tar.gz or folder, or an ImageFolder (build)")
    cache.add_argument("--size", type=int, default=None, help="image size (default: the data's own, 64 for Tiny "
                       "ImageNet; other images are resized and centre-cropped to it)")
    words = sub.add_parser("vocabulary", help="write a starter vocabulary.toml beside an ImageFolder's train/ "
                           "(one entry per class folder), or the one a data set's WordNet files convert into "
                           "(Tiny ImageNet); never overwrites")
    words.add_argument("--data", required=True, type=Path, help="the ImageFolder (its train/<class>/ folders), or "
                       "a Tiny ImageNet .tar.gz or folder")
    words.add_argument("--out", type=Path, default=None, help="where to write (default: vocabulary.toml in --data, "
                       "a folder)")
    train = sub.add_parser("run", help="train all stages (resumes if --out exists)")
    train.add_argument("--preset", default=None, help=f"{' | '.join(PRESETS)} (not needed to resume; fitted to "
                       "the data's class count, and each change printed)")
    train.add_argument("--data", default=None, help="data path (overrides the preset's)")
    train.add_argument("--out", required=True, type=Path, help="run directory")
    train.add_argument("--reuse-from", type=Path, default=None,
                       help="copy finished stages of another run whose configuration they do not depend on")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config field (value parsed as JSON when it can be)")
    train.add_argument("--init", type=Path, default=None, metavar="FILE",
                       help="start stage 1 from a network that knows images: a .taper bundle (its generic "
                       "network), a finished run directory, or a ResNet-18 state dict in torchvision's layout "
                       "(.pth or .safetensors; width 1.0, imagenet stem). The width and stem must be the "
                       "start's; the classifier is re-sized; fine-tuning defaults apply (docs/training.md)")
    train.add_argument("--exclude-classes", type=Path, default=None, metavar="FILE",
                       help="leave these classes out of training (ids one per line, a JSON list, or a JSON "
                       "{\"classes\": {folder: id}}): an upstream that never sees the classes you measure on")
    train.add_argument("--until", choices=("stage1", "stage2", "stage3"), default="stage3",
                       help="stop after this stage (e.g. stage2 to judge a stage-2 recipe with `bases`)")
    train.add_argument("--device", default="cpu", help="cpu (default) or cuda: training set on the GPU, bf16 autocast")
    prepare = sub.add_parser("prepare", help="write a run directory's configuration and class embeddings, no "
                             "training (for a machine without the text encoder; then `run --out` there)")
    prepare.add_argument("--preset", required=True, help=" | ".join(PRESETS))
    prepare.add_argument("--data", default=None, help="data path (overrides the preset's)")
    prepare.add_argument("--out", required=True, type=Path, help="run directory")
    prepare.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    evaluate = sub.add_parser("eval", help="evaluate a finished run; writes <run>/eval.json")
    evaluate.add_argument("run_dir", type=Path)
    evaluate.add_argument("--seed-runs", type=Path, nargs="+", default=[], metavar="RUN",
                          help="runs made with --reuse-from RUN_DIR --set stage3_seed=N (for stage3_seed_std)")
    evaluate.add_argument("--report", type=Path, default=None,
                          help="also write <REPORT>.json, <REPORT>.md and SVG plots (e.g. docs/results/bench)")
    evaluate.add_argument("--device", default="cpu", help="where the networks run: cpu (default) or cuda (float32)")
    report = sub.add_parser("report", help="write docs from an evaluated run's eval.json (no re-evaluation)")
    report.add_argument("run_dir", type=Path)
    report.add_argument("--out", type=Path, required=True, help="e.g. docs/results/bench")
    speed = sub.add_parser("throughput", help="measure ResNet-18 training images/s")
    speed.add_argument("--width", type=float, nargs="+", default=[0.5, 0.25])
    speed.add_argument("--stem", default="imagenet")
    speed.add_argument("--size", type=int, default=64)
    speed.add_argument("--batch", type=int, default=128)
    speed.add_argument("--steps", type=int, default=8)
    speed.add_argument("--stage3", action="store_true", help="also time a stage-3 step against a stage-1 step")
    speed.add_argument("--tasks-per-batch", type=int, nargs="+", default=[PRESETS["bench"].tasks_per_batch])
    speed.add_argument("--device", default="cpu", help="cpu (default) or cuda (bf16 autocast, channels-last)")
    args = parser.parse_args(argv)

    created = False   # whether `run`/`prepare` made its --out folder (removed again if the command fails at once)
    try:
        if args.command == "vocabulary":
            write_vocabulary(args.data, args.out)
        elif args.command == "cache" and args.action != "build":
            from .data.cache import clear_caches, list_caches

            if args.action == "list":
                rows = list_caches()
                for row in rows:
                    print(f"{row['size_mb']:>9.1f} MB  {row['folder']}  ({row['source']})")
                print(f"{len(rows)} caches, {sum(r['size_mb'] for r in rows):.1f} MB")
            else:
                print(f"removed {clear_caches()} caches")
        elif args.command == "cache":
            from .data.cache import load_dataset

            if args.data is None:
                raise ValueError("cache build needs --data")
            start = time.perf_counter()
            data = load_dataset(args.data, args.size)
            print(json.dumps({"cache": str(data.folder), "classes": data.num_classes, "train": len(data.train),
                              "val": len(data.val), "seconds": round(time.perf_counter() - start, 1)}))
        elif args.command in ("run", "prepare"):
            from .run import prepare, run

            overrides = dict(_parse_override(item) for item in args.set)
            if args.data:
                overrides["data"] = args.data
            if getattr(args, "exclude_classes", None) is not None:
                from .data.holdout import read_class_list

                overrides["exclude_classes"] = read_class_list(args.exclude_classes)
            if getattr(args, "init", None) is not None:
                if not args.init.exists():
                    raise ValueError(f"--init {args.init}: file not found")
                overrides["stage1_init"] = str(args.init.resolve())
            created = not args.out.exists()
            args.out.mkdir(parents=True, exist_ok=True)
            run_dir = RunDir(args.out)
            if not run_dir.config.exists():  # the command that made the run, not one resuming it
                run_dir.command.write_text(" ".join(["python -m trainer", *(argv or sys.argv[1:])]) + "\n")
            if args.command == "prepare":
                out = prepare(args.out, args.preset, overrides)
            else:
                out = run(args.out, args.preset, overrides, reuse_from=args.reuse_from, until=args.until,
                          device=TrainDevice.parse(args.device))
            print(f"run directory: {out}")
            print(f"next: python -m trainer eval {out}   then: python -m export bundle {out} --out "
                  f"{out.name}.taper" if args.command == "run" and args.until == "stage3"
                  else f"next: python -m trainer run --out {out}")
        elif args.command == "eval":
            from .report import evaluate_run
            from .results import write_report

            result = evaluate_run(args.run_dir, seed_runs=args.seed_runs, device=TrainDevice.parse(args.device).device)
            print(json.dumps({k: v for k, v in result.items() if k != "config"}, indent=1))
            print(f"next: python -m export bundle {args.run_dir} --out {args.run_dir.name}.taper")
            if args.report:
                for path in write_report(result, args.report, run_command(args.run_dir)):
                    print(f"wrote {path}")
        elif args.command == "report":
            from .results import refresh_wall_times, write_report

            result = refresh_wall_times(json.loads(RunDir(args.run_dir).eval.read_text()), args.run_dir)
            for path in write_report(result, args.out, run_command(args.run_dir)):
                print(f"wrote {path}")
        elif args.command == "throughput":
            from .throughput import measure_training_throughput

            device = TrainDevice.parse(args.device)
            for width in args.width:
                print(json.dumps(measure_training_throughput(width, args.stem, args.size, args.batch, args.steps,
                                                             device=device)), flush=True)
                if args.stage3:
                    from .throughput import measure_stage3_ratio

                    for groups in args.tasks_per_batch:
                        print(json.dumps(measure_stage3_ratio(width, args.stem, args.size, args.batch, groups,
                                                              steps=args.steps, device=device)), flush=True)
    except (DataError, ValueError, FileNotFoundError) as e:
        print(f"error: {terminal_text(e)}", file=sys.stderr)
        if created:   # a run directory this command made and that holds only its command: removed
            leftover = {p.name for p in args.out.iterdir()}
            if leftover <= {RunDir(args.out).command.name}:
                for name in leftover:
                    (args.out / name).unlink()
                args.out.rmdir()
        return 2
    return 0


def run_command(run_dir: Path) -> str:
    """The command that made a run (for reports), or one that resumes it."""
    saved = RunDir(run_dir).command
    return saved.read_text().strip() if saved.exists() else f"python -m trainer run --out {run_dir}"


def _parse_override(item: str) -> tuple[str, object]:
    key, sep, value = item.partition("=")
    if not sep:
        raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key, tuple(parsed) if isinstance(parsed, list) else parsed


if __name__ == "__main__":
    sys.exit(main())
