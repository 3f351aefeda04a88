import subprocess
import sys


def test_sdk_never_imports_torch_or_the_trainer():
    code = ("import sys, sdk, sdk.format.tensorfile, sdk.media.images, sdk.text.encoder, sdk.media.preprocessing; "
            "bad = [m for m in ('torch', 'trainer', 'export', 'transformers') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_trainer_without_torch_says_which_extra_to_install():
    code = ("import sys, runpy; sys.modules['torch'] = None; sys.argv = ['-m', '--help']; "
            "runpy.run_module('trainer', run_name='__main__', alter_sys=True)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "taper-sdk[train]" in result.stderr


def test_reprs_are_short(tiny_bundle):
    import sdk

    bundle = sdk.load(tiny_bundle)
    model = sdk.personalize(bundle, "round shapes")
    assert len(repr(model)) < 300 and "PersonalizedModel(classes=[" in repr(model)
    assert len(repr(bundle)) < 300 and "24 classes" in repr(bundle)


def test_the_shared_contracts_load_neither_onnxruntime_nor_tokenizers():
    """The trainer learns ResNet shapes, the mixer's tensors and the preprocessing from sdk's contract
    modules; importing them (and the trainer's run code) must not start the inference runtime."""
    code = ("import sys, sdk.fusion.architecture, sdk.fusion.mixer, sdk.format.manifest, sdk.media.preprocessing, "
            "trainer.run, trainer.models; "
            "bad = [m for m in ('onnxruntime', 'tokenizers') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


PACKAGES = ("sdk", "export", "trainer", "lab", "scripts")
ALLOWED = {  # who may import whom: data flows trainer -> run directory -> export -> bundle -> sdk
    "sdk": set(), "trainer": {"sdk"}, "export": {"sdk", "trainer"},
    "scripts": {"sdk", "trainer", "export"}, "lab": {"sdk", "trainer", "export", "scripts"},
}


def package_imports(root) -> dict[str, set[str]]:
    """Top-level package -> the other top-level packages its modules import (at any depth, lazily or not)."""
    import ast

    edges: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
                edges[package] |= {n.split(".")[0] for n in names} & set(PACKAGES) - {package}
    return edges


def test_no_import_cycle_across_the_top_level_packages():
    from pathlib import Path

    edges = package_imports(Path(__file__).resolve().parents[1])
    assert all(edges[p] <= ALLOWED[p] for p in PACKAGES), {p: edges[p] - ALLOWED[p] for p in PACKAGES}
    assert "export" in edges["scripts"] and "trainer" in edges["export"]   # the scan sees real edges
