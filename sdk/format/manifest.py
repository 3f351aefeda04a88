"""The bundle manifest as typed data: every field read, type-checked and range-checked one by one.

The manifest is the JSON object after a bundle's header (docs/bundle-format.md). `Manifest.from_json`
is the only way the SDK turns manifest JSON into values, so a field that is missing, of the wrong
type, out of range or unknown raises `BundleError` naming the field, never a KeyError or TypeError
later. `Manifest.to_json` is what the writer stores.

>>> m = Manifest.from_json(Manifest.example().to_json())
>>> m.architecture.stem, m.num_bases
('small', 3)
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field

from sdk.errors import BundleError
from sdk.format import strict_json
from sdk.fusion.architecture import mixed_layers, parameter_shapes
from sdk.fusion.bases import FLOAT_DTYPES, LAYER_KINDS, RANKED_KINDS, LayerStorage
from sdk.media.preprocessing import IMAGENET_MEAN, IMAGENET_STD, RESIZE, Preprocessing

FORMAT = "taper-bundle"
VERSION = 6                 # the newest version this SDK reads and writes
READ_VERSIONS = (3, 4, 5, 6)  # 3: no `subspace` kind; 4: no concepts; 5: concepts in classes.json;
                              # 6: version 5 signed (sdk.format.signing: an Ed25519 trailer)
# The version that introduced a layer kind (others: 3). A writer stamps the lowest version that holds the
# bundle, so a bundle without subspace layers or concepts still loads in taper-sdk 0.3.
KIND_SINCE = {"subspace": 4}
CONCEPTS_SINCE = 5          # classes.json's `concepts` and class_embeddings' `concepts` tensor
STEMS, WIDTHS = ("imagenet", "small"), (1.0, 0.5, 0.25, 0.125)  # 0.125: the capacity-limited bench (issue 12)
MEMBERS = ("bases.safetensors", "mixer.safetensors", "class_embeddings.safetensors", "classes.json",
           "backbone.onnx", "text_encoder.onnx", "tokenizer.json", "NOTICE")
MAX_PROMPTS, MAX_PROMPT_CHARS = 64, 200
MAX_PROVENANCE_DEPTH, MAX_PROVENANCE_VALUES, MAX_PROVENANCE_TEXT = 4, 4096, 64 * 1024
MAX_JSON_DEPTH = 16  # the manifest and classes.json; tokenizer.json is checked at 8
SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class Fields:
    """Typed, range-checked access to one JSON object of the manifest; `done` rejects unknown keys."""

    def __init__(self, obj: object, where: str):
        if not isinstance(obj, dict):
            raise BundleError(f"{where} must be an object")
        self.obj, self.where, self.seen = obj, where, set()

    def _get(self, key: str) -> object:
        if key not in self.obj:
            raise BundleError(f"{self.where}.{key} is missing")
        self.seen.add(key)
        return self.obj[key]

    def _fail(self, key: str, what: str) -> BundleError:
        return BundleError(f"{self.where}.{key} must be {what}")

    def int(self, key: str, low: int, high: int) -> int:
        value = self._get(key)
        if type(value) is not int or not low <= value <= high:  # bool is not an int here
            raise self._fail(key, f"an integer in [{low}, {high}]")
        return value

    def float(self, key: str, low: float, high: float) -> float:
        value = self._get(key)
        if type(value) not in (int, float) or not math.isfinite(value) or not low <= value <= high:
            raise self._fail(key, f"a finite number in [{low}, {high}]")
        return float(value)

    def choice(self, key: str, options: tuple) -> object:
        value = self._get(key)
        if type(value) not in {type(o) for o in options} or value not in options:
            raise self._fail(key, f"one of {list(options)}")
        return value

    def str(self, key: str, max_chars: int = 1000, pattern: re.Pattern | None = None) -> str:
        value = self._get(key)
        if not isinstance(value, str) or len(value) > max_chars or (pattern and not pattern.fullmatch(value)):
            raise self._fail(key, f"a string of at most {max_chars} characters" + (" (hex)" if pattern else ""))
        return value

    def numbers(self, key: str, n: int, low: float, high: float) -> tuple[float, ...]:
        value = self._get(key)
        ok = isinstance(value, list) and len(value) == n and all(
            type(v) in (int, float) and math.isfinite(v) and low <= v <= high for v in value)
        if not ok:
            raise self._fail(key, f"a list of {n} finite numbers in [{low}, {high}]")
        return tuple(float(v) for v in value)

    def object(self, key: str) -> Fields:
        return Fields(self._get(key), f"{self.where}.{key}")

    def raw(self, key: str) -> object:
        return self._get(key)

    def done(self) -> None:
        unknown = sorted(set(self.obj) - self.seen)
        if unknown:
            raise BundleError(f"{self.where} has unknown fields {unknown[:5]}")


@dataclass(frozen=True)
class Architecture:
    """The ResNet-18 the bases share (`sdk.fusion.architecture.parameter_shapes` spells out its tensors)."""
    stem: str
    width: float
    num_classes: int
    input_size: int

    @classmethod
    def read(cls, f: Fields) -> Architecture:
        out = cls(f.choice("stem", STEMS), f.choice("width", WIDTHS), f.int("num_classes", 2, 100_000),
                  f.int("input_size", 8, 1024))
        f.done()
        return out


@dataclass(frozen=True)
class MixerSpec:
    """The mixer predictor: `layers` linear layers of width `hidden` from `embed_dim` to blocks x Q."""
    embed_dim: int
    hidden: int
    layers: int
    blocks: int

    @classmethod
    def read(cls, f: Fields) -> MixerSpec:
        out = cls(f.int("embed_dim", 1, 4096), f.int("hidden", 1, 4096), f.int("layers", 2, 16),
                  f.choice("blocks", (1, 4)))
        f.done()
        return out


@dataclass(frozen=True)
class TextEncoderSpec:
    """How class names and descriptions are embedded: prompt templates (each with one "{}") and the
    tokenizer's truncation length."""
    prompts: tuple[str, ...]
    max_tokens: int

    @classmethod
    def read(cls, f: Fields) -> TextEncoderSpec:
        prompts = f.raw("prompts")
        ok = (isinstance(prompts, list) and 1 <= len(prompts) <= MAX_PROMPTS
              and all(isinstance(p, str) and len(p) <= MAX_PROMPT_CHARS and p.count("{}") == 1
                      and p.count("{") == 1 and p.count("}") == 1 for p in prompts))
        if not ok:
            raise f._fail("prompts", f"1-{MAX_PROMPTS} strings of at most {MAX_PROMPT_CHARS} characters, "
                                     "each with exactly one '{}' and no other braces")
        out = cls(tuple(prompts), f.int("max_tokens", 8, 512))
        f.done()
        return out


@dataclass(frozen=True)
class MemberEntry:
    """Where a member's bytes are in the file, and their SHA-256 (lower-case hex)."""
    offset: int
    size: int
    sha256: str

    @classmethod
    def read(cls, f: Fields) -> MemberEntry:
        out = cls(f.int("offset", 0, 2**62), f.int("size", 0, 2**62), f.str("sha256", 64, SHA256_HEX))
        f.done()
        return out


def _read_layer_storage(f: Fields, rows: int, columns: int) -> LayerStorage:
    """One layer's storage entry: a kind of LAYER_KINDS, a float dtype, and a rank only where the kind has one."""
    kind, dtype = f.choice("kind", LAYER_KINDS), f.choice("dtype", tuple(FLOAT_DTYPES))
    rank = f.int("rank", 1, min(rows, columns)) if kind in RANKED_KINDS else f.int("rank", 0, 0)
    f.done()
    return LayerStorage(kind, dtype, rank)


def _layer_storage(f: Fields, arch: Architecture) -> dict[str, LayerStorage]:
    """One entry per layer of the architecture, exactly."""
    out = {layer.name: _read_layer_storage(f.object(layer.name), layer.rows, layer.columns)
           for layer in mixed_layers(parameter_shapes(arch.stem, arch.width, arch.num_classes))}
    f.done()
    return out


def _preprocessing(f: Fields, input_size: int) -> Preprocessing:
    size = f.int("input_size", input_size, input_size)
    out = Preprocessing(size, f.numbers("mean", 3, -10.0, 10.0), f.numbers("std", 3, 1e-3, 10.0),
                        f.choice("resize", (RESIZE,)))
    f.done()
    return out


def load_json(raw: bytes, what: str, max_depth: int = MAX_JSON_DEPTH) -> object:
    """Parse UTF-8 JSON from a bundle (`sdk.format.strict_json`); BundleError for bad bytes, bad JSON, NaN or
    Infinity, or nesting deeper than max_depth."""
    try:
        return strict_json.loads(raw, what, max_depth)
    except ValueError as e:
        raise BundleError(str(e)) from None


def json_size(value: object) -> tuple[int, int]:
    """(values, code points of every key and string) of parsed JSON: a size both readers count alike
    (the Java core's Bundle.jsonSize), where the length of a serialisation depends on the serialiser."""
    values = text = 0
    stack = [value]
    while stack:
        item = stack.pop()
        values += 1
        if isinstance(item, dict):
            text += sum(len(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            text += len(item)
    return values, text


def _provenance(value: object) -> dict:
    """Provenance is informational; it is bounded in depth, values and text, and holds only JSON scalars,
    lists and objects."""
    if not isinstance(value, dict):
        raise BundleError("manifest.provenance must be an object")
    values, text = json_size(value)
    if strict_json.depth(value) > MAX_PROVENANCE_DEPTH or values > MAX_PROVENANCE_VALUES or text > MAX_PROVENANCE_TEXT:
        raise BundleError(f"manifest.provenance is deeper than {MAX_PROVENANCE_DEPTH}, or holds more than "
                          f"{MAX_PROVENANCE_VALUES} values or {MAX_PROVENANCE_TEXT} characters of text")
    f = Fields(value, "manifest.provenance")
    f.str("sdk_version", 40)
    f.object("licenses")
    return value


@dataclass(frozen=True)
class Manifest:
    """Everything a bundle says about itself besides its members' bytes (see docs/bundle-format.md)."""
    architecture: Architecture
    preprocessing: Preprocessing
    num_bases: int
    mixer: MixerSpec
    text_encoder: TextEncoderSpec
    bases: dict[str, LayerStorage]
    provenance: dict = field(default_factory=dict)
    members: dict[str, MemberEntry] = field(default_factory=dict)
    version: int = 5            # what a writer stamps is decided in sdk.format.bundle.encode_bundle

    @classmethod
    def from_json(cls, obj: object) -> Manifest:
        """Validate a parsed manifest field by field. Raises BundleError naming the first bad field."""
        f = Fields(obj, "manifest")
        f.choice("format", (FORMAT,))
        version = f.int("version", READ_VERSIONS[0], VERSION)
        arch = Architecture.read(f.object("architecture"))
        members = f.object("members")
        entries = {name: MemberEntry.read(members.object(name)) for name in MEMBERS}
        members.done()
        out = cls(arch, _preprocessing(f.object("preprocessing"), arch.input_size), f.int("num_bases", 1, 256),
                  MixerSpec.read(f.object("mixer")), TextEncoderSpec.read(f.object("text_encoder")),
                  _layer_storage(f.object("bases"), arch), _provenance(f.raw("provenance")), entries, version)
        f.done()
        if out.required_version() > version:
            raise BundleError(f"manifest: kind {out.newest_kind()!r} needs format version {out.required_version()}, "
                              f"the bundle says {version}")
        return out

    def required_version(self) -> int:
        """The lowest format version that holds these bases."""
        return max(KIND_SINCE.get(spec.kind, READ_VERSIONS[0]) for spec in self.bases.values())

    def newest_kind(self) -> str:
        return max(self.bases.values(), key=lambda spec: KIND_SINCE.get(spec.kind, 0)).kind

    def to_json(self) -> dict:
        """The manifest as JSON-native values (lists, not tuples), `members` included."""
        return json.loads(json.dumps(self._fields()))

    def _fields(self) -> dict:
        return {"format": FORMAT, "version": self.version,
                "members": {name: asdict(entry) for name, entry in self.members.items()},
                "architecture": asdict(self.architecture), "preprocessing": self.preprocessing.to_dict(),
                "num_bases": self.num_bases, "mixer": asdict(self.mixer),
                "text_encoder": {"prompts": list(self.text_encoder.prompts),
                                 "max_tokens": self.text_encoder.max_tokens},
                "bases": {name: asdict(spec) for name, spec in self.bases.items()},
                "provenance": self.provenance}

    @classmethod
    def example(cls) -> Manifest:
        """A small valid manifest (members not placed), for docs and tests."""
        arch = Architecture("small", 0.25, 24, 32)
        full = {layer.name: LayerStorage("full", "float32")
                for layer in mixed_layers(parameter_shapes(arch.stem, arch.width, arch.num_classes))}
        return cls(arch, Preprocessing(32, IMAGENET_MEAN, IMAGENET_STD),
                   3, MixerSpec(384, 64, 4, 4), TextEncoderSpec(("a photo of a {}.",), 128), full,
                   {"sdk_version": "0", "licenses": {}},
                   {name: MemberEntry(0, 0, "0" * 64) for name in MEMBERS})
