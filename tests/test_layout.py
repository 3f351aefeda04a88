"""The runtime's rooms (issue 73): `sdk/` is a few packages by concern whose imports flow one way, with no
circle between its modules, a top level of at most 12 modules, and an `__init__` in each package that says
its purpose and names its modules. Every import counts: at the top of a module, inside a function, and
under TYPE_CHECKING."""

import ast
import re
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[1] / "sdk"
# Each package may import the ones before it (and the base modules); the public API may import them all.
LAYERS = ("media", "fusion", "format", "engines", "text")
BASE = {"sdk.errors", "sdk._version"}   # imported by every room; they import nothing of the SDK
MAX_TOP_LEVEL = 12


def module_name(path: Path, root: Path = SDK) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str], root: Path = SDK) -> set[str]:
    """The SDK modules a file imports, anywhere in it (`from sdk.x import name` counts sdk.x, or sdk.x.name
    where that is a module)."""
    tree = ast.parse(path.read_text())
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "sdk"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            if base.split(".")[0] != "sdk":
                continue
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {m for m in found if m in modules and m != here}


def import_graph(root: Path = SDK) -> dict[str, set[str]]:
    """module -> the SDK modules it imports, for every module under `root`."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(p, root) for p in files}
    return {module_name(p, root): imports_of(p, modules, root) for p in files}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def room(module: str) -> str:
    """The package a module lives in ("api" for the top level)."""
    if module in BASE:
        return "base"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else "api"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a room by one before it (the package `sdk` itself aside)."""
    order = ("base", *LAYERS, "api")
    return [f"{a} ({room(a)}) imports {b} ({room(b)})" for a, targets in graph.items() for b in targets
            if order.index(room(b)) > order.index(room(a)) and b != "sdk"]


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles a depth-first walk of the graph finds, each as the path that closes it."""
    circles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, set()) - {"sdk"}):
            if state.get(nxt) == "open":
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    return circles


def test_imports_flow_one_way_between_the_rooms(graph):
    assert upward_imports(graph) == []


def test_no_module_of_the_sdk_is_in_an_import_circle(graph):
    assert import_circles(graph) == []


def test_the_top_level_is_small_and_every_package_says_what_it_holds():
    top = sorted(p.name for p in SDK.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top
    packages = sorted(p.name for p in SDK.iterdir() if (p / "__init__.py").is_file())
    assert packages == sorted(LAYERS)
    for name in packages:
        init = SDK / name / "__init__.py"
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree)
        assert doc and len(doc.splitlines()[0]) > 20, f"{init}: a one-line purpose first"
        listed = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                      and any(getattr(t, "id", "") == "__all__" for t in n.targets))
        modules = sorted([p.stem for p in (SDK / name).glob("*.py") if p.name != "__init__.py"]
                         + [p.name for p in (SDK / name).iterdir() if (p / "__init__.py").is_file()])
        assert sorted(listed) == modules, f"{init} names {sorted(listed)}, the package holds {modules}"
        assert all(f"`{m}`" in doc for m in modules), f"{init}'s docstring names each module"


def test_the_checker_sees_an_upward_import_and_a_circle(tmp_path):
    """Both checks, on a made-up sdk/ whose media room imports the format room lazily, and back: they fail."""
    root = tmp_path / "sdk"
    for package in ("media", "format"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "media" / "images.py").write_text("def f():\n    from ..format import bundle\n")
    (root / "format" / "bundle.py").write_text("from sdk.media.images import f\n")
    fake = import_graph(root)
    assert fake["sdk.media.images"] == {"sdk.format.bundle"} and fake["sdk.format.bundle"] == {"sdk.media.images"}
    assert upward_imports(fake) == ["sdk.media.images (media) imports sdk.format.bundle (format)"]
    assert import_circles(fake) == [["sdk.format.bundle", "sdk.media.images", "sdk.format.bundle"]]


JAVA_CORE = SDK.parent / "android_demo" / "core" / "src" / "main" / "java" / "org" / "taper" / "sdk"
PYTHON_PATH = re.compile(r"(?<![\w.])sdk[/.](\w+)[/.]")   # "sdk/fusion/bases.py" or "sdk.text.resolver.TaskOptions"


def java_rooms(root: Path = JAVA_CORE) -> dict[str, tuple[str, set[str]]]:
    """Each Java class of the core -> (its package under org.taper.sdk, "api" at the top; the room of the first
    Python module its docs name, the code it mirrors, as a set: empty where none is named)."""
    found = {}
    for path in sorted(root.rglob("*.java")):
        package = re.search(r"^package org\.taper\.sdk(?:\.(\w+))?;", path.read_text(), re.M)
        assert package, f"{path}: not in org.taper.sdk"
        named = set(PYTHON_PATH.findall(path.read_text())[:1]) & set(LAYERS)
        found[path.stem] = (package.group(1) or "api", named)
    return found


def java_room_mismatches(rooms: dict[str, tuple[str, set[str]]]) -> list[str]:
    """Java classes whose package is no Python room, or which mirror Python code of another room only."""
    bad = []
    for name, (package, named) in rooms.items():
        if package != "api" and package not in LAYERS:
            bad.append(f"{name}: package {package} is no room of sdk/ ({', '.join(LAYERS)})")
        elif package != "api" and named and package not in named:
            bad.append(f"{name} in {package} mirrors {sorted(named)}")
    return bad


def test_the_java_core_is_in_packages_named_after_the_python_rooms():
    rooms = java_rooms()
    assert java_room_mismatches(rooms) == []
    assert {package for package, _ in rooms.values()} == {"api", *LAYERS}
    assert rooms["Personalizer"][0] == "api" and rooms["Bundle"][0] == "format"


def test_the_java_room_check_sees_a_class_in_the_wrong_room(tmp_path):
    (tmp_path / "text").mkdir()
    mixer = "package org.taper.sdk.text;\n/** sdk/fusion/mixer.py, then sdk/text/x */\n"
    (tmp_path / "text" / "Mixer.java").write_text(mixer)
    (tmp_path / "Misc.java").write_text("package org.taper.sdk.util;\n")
    assert java_room_mismatches(java_rooms(tmp_path)) == ["Misc: package util is no room of sdk/ (media, fusion, "
                                                          "format, engines, text)", "Mixer in text mirrors ['fusion']"]
