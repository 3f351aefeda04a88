"""The `.taper` bundle: the one module that reads and writes the format (docs/bundle-format.md).

Layout, versions 3 to 6 (integers little-endian):
    0   8 bytes   magic b"TAPERBDL"
    8   u32       format version (3 to 6: the manifest's `version`)
    12  u32       flags (0: reserved, a reader rejects anything else)
    16  u64       manifest length M
    24  32 bytes  SHA-256 of the manifest bytes
    56  8 bytes   reserved (zero)
    64  M bytes   manifest (UTF-8 JSON, `sdk.format.manifest.Manifest`)
    ... members, each starting on a 64-byte boundary at the offset the manifest gives, zero padding between
    version 6 only: the last 128 bytes are the signature trailer (`sdk.format.signing`), after every member

Reading (`Bundle.open`) checks the header, the manifest's checksum, every manifest field
(`Manifest.from_json`), every member's bounds, every tensor's dtype and shape against the
architecture, and with `verify=True` (the default) the SHA-256 of every member and that every weight
is finite. Any failure raises `BundleError`. Nothing in a bundle is executed or unpickled: tensors are
raw arrays, and the two graphs pass `sdk.format.graph_check` before onnxruntime sees them.

Writing (`write_bundle`) needs only numpy: the exporter builds the members, this module places them.

>>> bundle = Bundle.open("tiny-imagenet.taper")        # doctest: +SKIP
>>> bundle.classes[:2]                                  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import stat
import struct
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from sdk.errors import BundleError, TensorFileError
from sdk.format.manifest import CONCEPTS_SINCE, MEMBERS, READ_VERSIONS, Manifest, MemberEntry, load_json
from sdk.format.signing import SIGNED_SINCE, TRAILER, Signer, SigningKey, check_trusted, sign_header, verify_trailer
from sdk.format.tensorfile import encode_header, read_tensors
from sdk.fusion.architecture import NUM_BLOCKS, block_layout, parameter_shapes
from sdk.fusion.bases import CompactBases
from sdk.fusion.folding import backbone_layout
from sdk.fusion.mixer import tensor_shapes as mixer_tensor_shapes
from sdk.media.files import atomic_file

MAGIC = b"TAPERBDL"
HEADER = struct.Struct("<8sII Q32s8s")
ALIGN = 64
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_CLASSES_JSON_BYTES = 64 * 1024 * 1024
MAX_NAME_CHARS, MAX_PATH_DEPTH = 1000, 64
MAX_CONCEPTS, MAX_CONCEPT_NAMES = 100_000, 64
# A concept's `kinds`: names of the kinds below it that no class is ("beagle" below 'dog'); the exporter wrote
# 605 for one concept of the held-out bundle (scripts/heldout_data), so this bound is far from what it writes.
MAX_CONCEPT_KINDS = 20_000
VERIFY_CHUNK = 1 << 24  # bytes hashed / floats checked per step while verifying (bounded temporaries)
EMBEDDING_NORM_TOLERANCE = 1e-3   # |norm - 1| of a class or concept embedding row (Bundle.java too)
# What older versions were, for the message that rejects them.
OLDER_VERSIONS = {1: "taper-sdk 0.1 (no manifest checksum)", 2: "taper-sdk 0.2 (Q full bases, no compact forms)"}


@dataclass
class ClassInfo:
    """One class: its id, the short name a person sees, its other names, its hierarchy path (root first) and
    a one-line description ("" if none)."""
    id: str
    name: str
    path: list[str]
    aliases: list[str] = field(default_factory=list)
    description: str = ""


CLASS_KEYS, CLASS_OPTIONAL_KEYS = frozenset({"id", "name", "path"}), frozenset({"aliases", "description"})
CONCEPT_KEYS = frozenset({"id", "names", "members"})   # and optionally "kinds"
MAX_ALIASES = 64


def display_name(stored: str) -> tuple[str, list[str]]:
    """(display name, aliases) of a class name stored without `aliases`: older exporters wrote WordNet's
    synonym list ("ladybug, ladybeetle, lady beetle") as the name. Split at commas, ASCII spaces trimmed
    (Bundle.java does the same), empty parts dropped.

    >>> display_name("ladybug, ladybeetle, lady beetle")
    ('ladybug', ['ladybeetle', 'lady beetle'])
    """
    parts = [p.strip(" ") for p in stored.split(",")]
    parts = [p for p in parts if p]
    return (parts[0], parts[1:]) if parts else (stored, [])


# A concept keyed so was derived at export from WordNet for a vocabulary of one's own classes (trainer/data/
# english.py), not written by the bundle's author; a resolution that uses one says so.
DERIVED_CONCEPT_PREFIX = "wordnet/"


@dataclass
class Concept:
    """A kind of thing the classes belong to (a WordNet hypernym such as "clothing"): its names, the
    first primary, its classes (sorted indices, at least two) and the names of the kinds below it that no
    class is (`kinds`: "beagle" below 'dog'; the resolver tells them missing and names this concept)."""
    id: str
    names: list[str]
    members: list[int]
    kinds: list[str] = field(default_factory=list)

    @property
    def derived(self) -> bool:
        """Whether the exporter derived it from WordNet (id `wordnet/...`) rather than the author wrote it."""
        return self.id.startswith(DERIVED_CONCEPT_PREFIX)


class Bundle:
    """A validated bundle. The bases are read-only views into the memory-mapped file (or into memory
    with `in_memory=True`); every smaller member is copied at load.

    Attributes:
        manifest: the typed manifest. shapes / layout: the architecture's tensors and block layout.
        bases: the bases, layer by layer (`sdk.fusion.bases.CompactBases`). mixer: the mixer predictor's tensors.
        class_embeddings: [num_classes, embed_dim]. classes / supercategories / concepts: from classes.json
        (no concepts before version 5). concept_embeddings: [len(concepts), embed_dim].
        backbone_layout / backbone_size: the backbone graph's external-data layout (`backbone_layout`).
        signer: who signed the bundle (`sdk.format.signing.Signer`, its signature verified), or None (unsigned).
    """

    def __init__(self, data: np.ndarray, manifest: Manifest, source: str, fd: int | None = None,
                 verify: bool = False, signer: Signer | None = None, trusted_keys: frozenset[bytes] | None = None):
        """Use `open` or `from_buffer`, which check the header, the manifest and the signature (`signer`), and
        every member's SHA-256 where `checksummed` says so."""
        self.data, self.manifest, self.source = data, manifest, source
        self._checksummed = checksummed(verify, trusted_keys)
        self.trusted_keys = trusted_keys     # the loading policy, which files read for this bundle follow too
        # The header's SHA-256 of the manifest, checked by `parse_manifest`; it covers every member's SHA-256.
        self.manifest_sha256 = HEADER.unpack(bytes(data[:HEADER.size]))[4].hex()
        self.signer = signer
        self._fd, self._stat = fd, _identity(os.fstat(fd)) if fd is not None else None
        arch = manifest.architecture
        self.shapes = parameter_shapes(arch.stem, arch.width, arch.num_classes)
        self.layout = block_layout(self.shapes)
        self.backbone_layout, self.backbone_size = backbone_layout(self.shapes)
        self.bases = CompactBases.from_tensors(self._member_tensors("bases.safetensors"), manifest.bases,
                                               self.shapes, manifest.num_bases)
        self.mixer = self._tensors("mixer.safetensors", self._mixer_shapes(), copy=True)
        self.classes, self.supercategories, self.concepts = self._classes()
        dim = manifest.mixer.embed_dim
        embeddings = self._tensors("class_embeddings.safetensors", {
            "text": (arch.num_classes, dim),
            **({"concepts": (len(self.concepts), dim)} if manifest.version >= CONCEPTS_SINCE else {})}, copy=True)
        self.class_embeddings = embeddings["text"]
        self.concept_embeddings = embeddings.get("concepts", np.zeros((0, dim), np.float32))
        if verify:
            self.verify_finite()
        if fd is not None:  # only once valid: `open` closes the descriptor itself when validation fails
            weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls, path: str | Path, verify: bool = True, in_memory: bool = False,
             trusted_keys: frozenset[bytes] | None = None) -> Bundle:
        """Open and validate the bundle at `path`.

        Args:
            verify: check every member's SHA-256 (one pass over the file) and that every weight is finite
                (a second pass over the weights).
            in_memory: read the whole file into memory instead of mapping it, so that later changes to
                the file cannot affect the loaded bundle (see `check_unchanged`).
            trusted_keys: raw public keys (`sdk.format.signing.trusted_set`): accept only a bundle signed by one
                of them; its members' SHA-256 are then checked whatever `verify` says.
        Raises:
            BundleError: the file is missing, unreadable, not a bundle, damaged or inconsistent; or, with
                trusted_keys, unsigned, badly signed or signed by another key.
        """
        path = Path(path)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as e:
            raise BundleError(f"{path}: {e.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise BundleError("not a regular file")
            if info.st_size < HEADER.size:
                raise BundleError(f"{info.st_size} bytes is too short for a bundle")
            # Map (or read) the file that was just checked, through its descriptor: opening the path again
            # could reach another file swapped in meanwhile.
            if in_memory:
                with open(fd, "rb", closefd=False) as f:
                    data = np.frombuffer(f.read(info.st_size), np.uint8)
                os.close(fd)
                fd = None
            else:
                data = np.frombuffer(mmap.mmap(fd, info.st_size, access=mmap.ACCESS_READ), np.uint8)
            return cls.from_buffer(data, str(path), verify, fd, trusted_keys)
        except BaseException as e:
            if fd is not None:
                os.close(fd)
            if isinstance(e, BundleError):
                raise BundleError(f"{path}: {e}") from None
            raise

    @classmethod
    def from_buffer(cls, data: np.ndarray, source: str = "<memory>", verify: bool = True,
                    fd: int | None = None, trusted_keys: frozenset[bytes] | None = None) -> Bundle:
        """Validate a bundle held in a uint8 array (see `open`)."""
        manifest = parse_manifest(data)
        signer = read_signer(data, manifest)
        if trusted_keys is not None:
            # Before the members are read: an untrusted bundle is refused before any of its content is parsed.
            check_trusted(signer, trusted_keys)
        if checksummed(verify, trusted_keys):
            verify_checksums(data, manifest)
        return cls(data, manifest, source, fd, verify, signer, trusted_keys)

    def check_unchanged(self) -> None:
        """BundleError if the mapped file was truncated or rewritten since it was opened: reading a
        truncated mapping would kill the process (SIGBUS). A file replaced by a rename is harmless
        (the mapping keeps the old one). Bundles opened with `in_memory=True` are never affected."""
        if self._fd is not None and _identity(os.fstat(self._fd)) != self._stat:
            raise BundleError(f"{self.source}: the file changed on disk after it was loaded; load it again "
                              "(or use sdk.load(..., in_memory=True))")

    def verify_finite(self) -> None:
        """BundleError if any weight is NaN or infinite, an int8 scale or a running variance negative (checked
        in bounded chunks), or a class or concept embedding is not a unit vector."""
        self.bases.verify_finite()
        for name, array in self.mixer.items():
            if name.endswith("running_var") and (array < 0).any():
                raise BundleError(f"mixer.safetensors:{name} holds negative running variances")
        tensors = {**{f"mixer.safetensors:{k}": v for k, v in self.mixer.items()},
                   "class_embeddings.safetensors:text": self.class_embeddings,
                   "class_embeddings.safetensors:concepts": self.concept_embeddings}
        for name, array in tensors.items():
            flat = array.reshape(-1)
            for start in range(0, flat.size, VERIFY_CHUNK // 4):
                if not np.isfinite(flat[start:start + VERIFY_CHUNK // 4]).all():
                    raise BundleError(f"{name} holds NaN or infinite values")
        # Text embeddings are unit vectors as written (sdk.text.encoder); a re-signed edit that keeps them
        # finite but not unit length would move every task embedding (the Java core checks the same).
        for name, table in (("text", self.class_embeddings), ("concepts", self.concept_embeddings)):
            norms = np.linalg.norm(np.asarray(table, np.float64), axis=1)
            if norms.size and np.abs(norms - 1).max() > EMBEDDING_NORM_TOLERANCE:
                raise BundleError(f"class_embeddings.safetensors:{name} rows must be unit vectors "
                                  f"(one has norm {norms[np.abs(norms - 1).argmax()]:.6g})")

    def member(self, name: str) -> np.ndarray:
        entry = self.manifest.members[name]
        return self.data[entry.offset:entry.offset + entry.size]

    def member_bytes(self, name: str) -> bytes:
        return self.member(name).tobytes()

    def member_sha256(self, name: str) -> bytes:
        """The SHA-256 of the member's bytes: the manifest's where they were checked against it at open (hashing
        the text encoder's 23 MB again made a load of the tiny bundle 72-78 ms against 51-58), hashed here
        otherwise (`verify=False`, where the manifest's claim is unchecked)."""
        if self._checksummed:
            return bytes.fromhex(self.manifest.members[name].sha256)
        return hashlib.sha256(self.member(name)).digest()

    def _mixer_shapes(self) -> dict[str, tuple[int, ...]]:
        spec = self.manifest.mixer
        return mixer_tensor_shapes(spec.embed_dim, spec.hidden, spec.layers, spec.blocks, self.manifest.num_bases)

    def _member_tensors(self, name: str) -> dict[str, np.ndarray]:
        try:
            return read_tensors(self.member(name))[0]
        except TensorFileError as e:
            raise BundleError(f"member {name}: {e}") from None

    def _tensors(self, name: str, expected: dict[str, tuple[int, ...]], copy: bool) -> dict[str, np.ndarray]:
        """The member's tensors, exactly the `expected` names, each float32 of the expected shape."""
        tensors = self._member_tensors(name)
        if set(tensors) != set(expected):
            extra, missing = sorted(set(tensors) - set(expected)), sorted(set(expected) - set(tensors))
            raise BundleError(f"member {name}: tensors differ from the architecture (missing {missing[:3]}, "
                              f"unexpected {extra[:3]})")
        for key, shape in expected.items():
            t = tensors[key]
            if t.dtype != np.float32 or tuple(t.shape) != tuple(shape):
                raise BundleError(f"member {name}: tensor {key!r} is {t.dtype} {tuple(t.shape)}, "
                                  f"expected float32 {tuple(shape)}")
            if copy:
                tensors[key] = np.array(t)
                tensors[key].flags.writeable = False
        return tensors

    def _classes(self) -> tuple[list[ClassInfo], dict[str, list[int]], list[Concept]]:
        what = "member classes.json"
        if self.manifest.members["classes.json"].size > MAX_CLASSES_JSON_BYTES:
            raise BundleError(f"{what} is larger than {MAX_CLASSES_JSON_BYTES} bytes")
        spec = load_json(self.member_bytes("classes.json"), what)
        n = self.manifest.architecture.num_classes
        keys = {"classes", "supercategories"} | ({"concepts"} if self.manifest.version >= CONCEPTS_SINCE else set())
        if not isinstance(spec, dict) or set(spec) != keys:
            raise BundleError(f"{what}: must be an object with exactly {sorted(keys)} (format version "
                              f"{self.manifest.version})")
        rows, groups = spec["classes"], spec["supercategories"]
        if not isinstance(rows, list) or len(rows) != n:
            raise BundleError(f"{what}: 'classes' must list {n} classes")
        classes = []
        for i, row in enumerate(rows):
            ok = (isinstance(row, dict) and CLASS_KEYS <= set(row) <= CLASS_KEYS | CLASS_OPTIONAL_KEYS
                  and all(_short_text(row[k]) for k in ("id", "name"))
                  and _text_list(row["path"], MAX_PATH_DEPTH)
                  and ("aliases" not in row or _text_list(row["aliases"], MAX_ALIASES, least=0))
                  and ("description" not in row or _short_text(row["description"])))
            if not ok:
                raise BundleError(f"{what}: class {i} must be {{id, name, path}} and optionally aliases and a "
                                  f"description, with non-empty strings of at most {MAX_NAME_CHARS} characters, a path "
                                  f"of 1-{MAX_PATH_DEPTH} of them and at most {MAX_ALIASES} aliases")
            name, aliases = (row["name"], list(row["aliases"])) if "aliases" in row else display_name(row["name"])
            classes.append(ClassInfo(row["id"], name, list(row["path"]), aliases, row.get("description", "")))
        if len({c.id for c in classes}) != n:
            raise BundleError(f"{what}: class ids are not unique")
        ok = isinstance(groups, dict) and all(
            _short_text(k) and isinstance(v, list) and 0 < len(v) <= n
            and all(type(i) is int and 0 <= i < n for i in v) for k, v in groups.items())
        if not ok:
            raise BundleError(f"{what}: 'supercategories' must map names to non-empty lists of class indices")
        concepts = _concepts(spec["concepts"], n, what) if "concepts" in spec else []
        return classes, {k: list(v) for k, v in groups.items()}, concepts

    def __repr__(self) -> str:
        a = self.manifest.architecture
        return (f"Bundle({self.source!r}, {a.num_classes} classes, {self.manifest.num_bases} bases, "
                f"ResNet-18 {a.stem} stem width {a.width} at {a.input_size} px, "
                f"{'signed by ' + str(self.signer) if self.signer else 'unsigned'})")


def _short_text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS


def _text_list(value: object, most: int, least: int = 1) -> bool:
    return isinstance(value, list) and least <= len(value) <= most and all(_short_text(v) for v in value)


def _concepts(rows: object, n: int, what: str) -> list[Concept]:
    """classes.json's `concepts`: 1 to MAX_CONCEPTS of {id, names, members} and optionally kinds, members
    strictly increasing class indices, at least two of them; kinds 1 to MAX_CONCEPT_KINDS names; ids unique."""
    if not isinstance(rows, list) or not 1 <= len(rows) <= MAX_CONCEPTS:
        raise BundleError(f"{what}: 'concepts' must list 1 to {MAX_CONCEPTS} concepts")
    concepts = []
    for i, row in enumerate(rows):
        ok = (isinstance(row, dict) and CONCEPT_KEYS <= set(row) <= CONCEPT_KEYS | {"kinds"}
              and _short_text(row["id"])
              and _text_list(row["names"], MAX_CONCEPT_NAMES) and isinstance(row["members"], list)
              and 2 <= len(row["members"]) <= n and all(type(c) is int and 0 <= c < n for c in row["members"])
              and all(a < b for a, b in zip(row["members"], row["members"][1:], strict=False))
              and ("kinds" not in row or _text_list(row["kinds"], MAX_CONCEPT_KINDS)))
        if not ok:
            raise BundleError(f"{what}: concept {i} must be {{id, names, members}} and optionally kinds: an id, "
                              f"1-{MAX_CONCEPT_NAMES} names (non-empty strings of at most {MAX_NAME_CHARS} "
                              f"characters), 2-{n} increasing class indices and 1-{MAX_CONCEPT_KINDS} kind names")
        concepts.append(Concept(row["id"], list(row["names"]), list(row["members"]), list(row.get("kinds", []))))
    if len({c.id for c in concepts}) != len(concepts):
        raise BundleError(f"{what}: concept ids are not unique")
    return concepts


def _classes_version(classes_json: bytes) -> int:
    """The lowest format version that holds this classes.json (tests write broken ones: those need no more)."""
    try:
        spec = json.loads(classes_json)
    except (ValueError, RecursionError):
        return READ_VERSIONS[0]
    return CONCEPTS_SINCE if isinstance(spec, dict) and "concepts" in spec else READ_VERSIONS[0]


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def parse_manifest(data: np.ndarray) -> Manifest:
    """Validate the header, the manifest's checksum and fields, and member bounds. Raises BundleError."""
    size = len(data)
    if size < HEADER.size:
        raise BundleError(f"{size} bytes is too short for a bundle")
    magic, version, flags, length, digest, reserved = HEADER.unpack(bytes(data[:HEADER.size]))
    if magic != MAGIC:
        raise BundleError("not a TAPER bundle (bad magic)")
    if version not in READ_VERSIONS:
        if version in OLDER_VERSIONS:
            raise BundleError(f"bundle format version {version} (written by {OLDER_VERSIONS[version]}) is no longer "
                              f"read; this SDK reads versions {READ_VERSIONS}: export the run again with "
                              "`python -m export bundle RUN --out FILE`")
        raise BundleError(f"bundle format version {version} is not supported (this SDK reads versions {READ_VERSIONS}; "
                          "a newer SDK may read it)")
    if flags != 0 or reserved != bytes(len(reserved)):
        raise BundleError("header: reserved bytes are not zero")
    if length > MAX_MANIFEST_BYTES or HEADER.size + length > size:
        raise BundleError(f"manifest length {length} does not fit in a {size}-byte file")
    raw = bytes(data[HEADER.size:HEADER.size + length])
    if hashlib.sha256(raw).digest() != digest:
        raise BundleError("manifest checksum mismatch (corrupt bundle)")
    manifest = Manifest.from_json(load_json(raw, "manifest"))
    if version >= SIGNED_SINCE and size < HEADER.size + length + TRAILER.size:
        raise BundleError(f"a {size}-byte file is too short for its manifest and signature trailer")
    if manifest.version != version:
        raise BundleError(f"manifest: version {manifest.version} differs from the header's {version}")
    _check_members(manifest.members, HEADER.size + length, size - (TRAILER.size if version >= SIGNED_SINCE else 0))
    return manifest


def read_signer(data: np.ndarray, manifest: Manifest) -> Signer | None:
    """The verified signer of a version-6 bundle (BundleError if its signature fails), None before 6."""
    if manifest.version < SIGNED_SINCE:
        return None
    return verify_trailer(bytes(data[:HEADER.size]), bytes(data[len(data) - TRAILER.size:]))


def _check_members(members: dict[str, MemberEntry], data_start: int, size: int) -> None:
    spans = []
    for name, entry in members.items():
        begin, end = entry.offset, entry.offset + entry.size
        if not data_start <= begin <= end <= size or begin % ALIGN:
            raise BundleError(f"member {name!r}: bytes [{begin}, {end}) outside the file or misaligned")
        spans.append((begin, end, name))
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:], strict=False):
        if begin < end:
            raise BundleError(f"members {a!r} and {b!r} overlap")


def checksummed(verify: bool, trusted_keys: frozenset[bytes] | None) -> bool:
    """Whether a load checks every member's SHA-256 (`Bundle.from_buffer`): with `verify`, and always under
    trusted keys."""
    return verify or trusted_keys is not None


def verify_checksums(data: np.ndarray, manifest: Manifest) -> None:
    """BundleError unless every member's bytes have the manifest's SHA-256."""
    for name, entry in manifest.members.items():
        digest = hashlib.sha256()
        for start in range(entry.offset, entry.offset + entry.size, VERIFY_CHUNK):
            digest.update(data[start:min(start + VERIFY_CHUNK, entry.offset + entry.size)])
        if digest.hexdigest() != entry.sha256:
            raise BundleError(f"member {name!r}: checksum mismatch (corrupt bundle)")


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    """float32 tensors as one safetensors member."""
    arrays = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}
    return encode_header(arrays) + b"".join(a.tobytes() for a in arrays.values())


def tensors_member(tensors: dict[str, np.ndarray]) -> bytes:
    """Tensors of any dtype as one safetensors member, widest dtype first, so that every tensor starts on
    a multiple of its item size (the data section starts 64-aligned) with no gaps."""
    order = sorted(tensors, key=lambda k: -tensors[k].dtype.itemsize)  # stable: given order within a dtype
    arrays = {k: np.ascontiguousarray(tensors[k]) for k in order}
    return encode_header(arrays) + b"".join(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
                                            for a in arrays.values())


def bases_bytes(bases: CompactBases) -> bytes:
    """The `bases.safetensors` member."""
    return tensors_member(bases.tensors())


def encode_bundle(manifest: Manifest, members: dict[str, bytes],
                  signed: bool = False) -> tuple[bytes, dict[str, MemberEntry]]:
    """The header + manifest bytes for `members` (placed in MEMBERS order), and where each member goes.
    The version stamped is the lowest that holds the bundle; `signed`: 6 (the trailer is the caller's)."""
    if set(members) != set(MEMBERS):
        raise BundleError(f"a bundle has exactly the members {list(MEMBERS)}")
    entries = {name: MemberEntry(0, len(members[name]), hashlib.sha256(members[name]).hexdigest())
               for name in MEMBERS}
    version = max(manifest.required_version(), _classes_version(members["classes.json"]))
    if signed:
        if version < CONCEPTS_SINCE:
            raise BundleError(f"only a version-{CONCEPTS_SINCE} bundle (with concepts) can be signed; this one is "
                              f"version {version}: export the run again, then sign it")
        version = SIGNED_SINCE
    manifest = replace(manifest, version=version)
    raw = b""
    for _ in range(10):  # offsets depend on the manifest's length, which depends on the offsets
        offset = _align(HEADER.size + len(raw))
        for name in MEMBERS:
            entries[name] = replace(entries[name], offset=offset)
            offset = _align(offset + entries[name].size)
        new = json.dumps(replace(manifest, members=entries).to_json(), separators=(",", ":"),
                         ensure_ascii=False).encode()
        if new == raw:
            break
        raw = new
    Manifest.from_json(json.loads(raw))  # the writer never writes what the reader would reject
    header = HEADER.pack(MAGIC, manifest.version, 0, len(raw), hashlib.sha256(raw).digest(), bytes(8))
    return header + raw, entries


def _pieces(manifest: Manifest, members: dict[str, bytes], key: SigningKey | None = None) -> Iterator[bytes]:
    head, entries = encode_bundle(manifest, members, signed=key is not None)
    yield head
    position = len(head)
    for name in MEMBERS:
        yield b"\0" * (entries[name].offset - position)
        yield members[name]
        position = entries[name].offset + entries[name].size
    if key is not None:
        yield sign_header(head[:HEADER.size], key)


def bundle_bytes(manifest: Manifest, members: dict[str, bytes], key: SigningKey | None = None) -> bytes:
    """A whole bundle in memory (what `write_bundle` writes); signed by `key` when given (version 6)."""
    return b"".join(_pieces(manifest, members, key))


def bundle_members(blob: bytes) -> tuple[Manifest, dict[str, bytes]]:
    """The manifest and member bytes of the bundle `blob` (header, manifest and bounds checked)."""
    manifest = parse_manifest(np.frombuffer(blob, np.uint8))
    return manifest, {n: blob[e.offset:e.offset + e.size] for n, e in manifest.members.items()}


def replace_member(blob: bytes, name: str, new: bytes) -> bytes:
    """The bundle `blob` rebuilt with member `name` replaced by `new` (any size): placed and checksummed
    again, its version stamped anew (so a classes.json with or without concepts gets 5 or 3/4). Unsigned:
    a signature cannot survive an edit."""
    manifest, members = bundle_members(blob)
    return bundle_bytes(manifest, {**members, name: new})


def write_bundle(path: str | Path, manifest: Manifest, members: dict[str, bytes],
                 key: SigningKey | None = None) -> Path:
    """Write a bundle atomically (temporary file beside it, then a rename; `sdk.media.files.atomic_file`).

    Args:
        manifest: every field but `members`, which is filled in here.
        members: the bytes of each of MEMBERS.
        key: sign it (format version 6; `sdk.format.signing`).
    Returns:
        The path written.
    """
    pieces = _pieces(manifest, members, key)
    head = next(pieces)  # validates before anything is written
    with atomic_file(path) as f:
        f.write(head)
        for piece in pieces:
            f.write(piece)
    return Path(path)


def _align(n: int) -> int:
    return n + (-n % ALIGN)


__all__ = ["ALIGN", "HEADER", "MAGIC", "MEMBERS", "NUM_BLOCKS", "Bundle", "ClassInfo", "Concept", "Manifest",
           "bases_bytes", "bundle_bytes", "bundle_members", "read_signer", "tensors_member",
           "encode_bundle", "parse_manifest", "replace_member", "safetensors_bytes", "verify_checksums", "write_bundle"]
