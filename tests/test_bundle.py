import json
import struct

import numpy as np
import pytest

from export.bundle import run_contents
from export.bundle_edits import PAD, manifest_of, with_manifest, with_member, without_concepts
from export.golden import HOSTILE_CONCEPTS, with_classes_json
from sdk.errors import BundleError
from sdk.format.bundle import HEADER, MEMBERS, Bundle, bundle_bytes, parse_manifest, write_bundle


def test_bundle_round_trip(tiny_bundle, tiny_run):
    bundle = Bundle.open(tiny_bundle)
    m = bundle.manifest
    assert set(m.members) == set(MEMBERS) and m.num_bases == 3 and m.version == 5  # 5: it has concepts
    assert [c.name for c in bundle.classes][:2] == ["red disc", "green disc"]
    assert set(bundle.supercategories) == {"round_shapes", "angular_shapes", "textures"}
    # Concepts: the synthetic hierarchy's path nodes holding 2 or more (not all) classes, each embedded.
    assert [(c.id, c.members) for c in bundle.concepts][:3] == [
        ("shapes", list(range(16))), ("angular shape", list(range(8, 16))), ("round shape", list(range(8)))]
    assert bundle.concept_embeddings.shape == (len(bundle.concepts), m.mixer.embed_dim)
    assert np.allclose(np.linalg.norm(bundle.concept_embeddings, axis=1), 1, atol=1e-5)
    assert {s.kind for s in m.bases.values()} == {"full"}  # the default export: the bases as trained
    weight = bundle.bases.layers[0].parts["weight"]
    assert not weight.flags.writeable  # a view into the mapped file, not a copy
    from trainer.checkpoints import load_state

    state = load_state(tiny_run / "stage3" / "model.safetensors")
    rows = bundle.bases.block_rows()  # the trainer's layout, rebuilt from the layers
    assert np.array_equal(rows[2][:, : state["bank.params2"].shape[1]], state["bank.params2"].numpy())
    assert np.array_equal(rows[3][:, state["bank.params3"].shape[1]:], state["bank.stats3"].numpy())
    assert b"Apache" in bundle.member_bytes("NOTICE")
    assert "Bundle(" in repr(bundle) and len(repr(bundle)) < 300


def test_provenance_has_versions_and_licences_but_no_local_paths(tiny_bundle):
    provenance = Bundle.open(tiny_bundle).manifest.provenance
    assert provenance["sdk_version"] and provenance["dataset"] == "synthetic"
    assert "Apache-2.0" in provenance["licenses"]["text_encoder"] and provenance["licenses"]["weights"]
    assert "/" not in json.dumps({k: v for k, v in provenance.items() if k != "licenses"})


@pytest.fixture(scope="module")
def small_bundle(tiny_run) -> bytes:
    """The tiny bundle with a stand-in text encoder (not read at load time), so fuzzing is fast, and slack
    in the manifest so edits keep its length (bundle_edits)."""
    manifest, members = run_contents(tiny_run)
    members["text_encoder.onnx"], members["tokenizer.json"] = b"stand-in", b"{}"
    from dataclasses import replace

    return bundle_bytes(replace(manifest, provenance={**manifest.provenance, "pad": "x" * PAD}), members)


def load_bytes(blob: bytes, verify: bool = True) -> Bundle:
    return Bundle.from_buffer(np.frombuffer(blob, np.uint8), verify=verify)


MANIFEST_EDITS = [
    lambda m: m.update(version=2),
    lambda m: m.update(version=4),
    lambda m: m.update(version=True),
    lambda m: m.pop("members"),
    lambda m: m.update(extra=1),
    lambda m: m["members"].pop("bases.safetensors"),
    lambda m: m["members"].update(extra={"offset": 0, "size": 0, "sha256": "0" * 64}),
    lambda m: m["members"]["bases.safetensors"].update(offset=m["members"]["bases.safetensors"]["offset"] + 64),
    lambda m: m["members"]["bases.safetensors"].update(size=10**12),
    lambda m: m["members"]["mixer.safetensors"].update(offset=-64),
    lambda m: m["members"]["mixer.safetensors"].update(offset=m["members"]["bases.safetensors"]["offset"]),
    lambda m: m["members"]["NOTICE"].update(sha256="0" * 64),
    lambda m: m["members"]["NOTICE"].update(sha256="G" * 64),
    lambda m: m["members"]["NOTICE"].update(sha256=None),
    lambda m: m["architecture"].update(num_classes=25),
    lambda m: m["architecture"].update(width=0.3),
    lambda m: m["architecture"].update(num_classes="24"),
    lambda m: m["architecture"].update(input_size=64),
    lambda m: m.update(num_bases=4),
    lambda m: m.update(num_bases=10**9),
    lambda m: m["mixer"].update(hidden=255),
    lambda m: m["mixer"].update(layers=1),
    lambda m: m["mixer"].update(blocks=2),
    lambda m: m["preprocessing"].update(std=[0, 1, 1]),
    lambda m: m["preprocessing"].update(mean={}),
    lambda m: m["preprocessing"].update(input_size=33),
    lambda m: m["preprocessing"].update(resize="stretch"),
    lambda m: m["text_encoder"].update(prompts=[]),
    lambda m: m["text_encoder"].update(prompts=["no placeholder"]),
    lambda m: m["text_encoder"].update(prompts=["{} and {}"]),
    lambda m: m["text_encoder"].update(prompts=["{0.__class__}"]),
    lambda m: m["text_encoder"].update(max_tokens="128"),
    lambda m: m["text_encoder"].pop("max_tokens"),
    lambda m: m["provenance"].update(deep=[[[[[[1]]]]]]),
    lambda m: m["provenance"].pop("sdk_version"),
    lambda m: m.update(architecture=[]),
    lambda m: m.update(provenance="x"),
]


def test_every_manifest_edit_raises_bundle_error(small_bundle):
    load_bytes(small_bundle)  # the undamaged bundle loads
    manifest, length = manifest_of(small_bundle)
    for edit in MANIFEST_EDITS:
        m = json.loads(json.dumps(manifest))
        edit(m)
        with pytest.raises(BundleError):
            load_bytes(with_manifest(small_bundle, m, length))


def test_random_damage_raises_bundle_error_or_changes_nothing(small_bundle):
    rng = np.random.default_rng(0)
    manifest, length = manifest_of(small_bundle)
    reference = load_bytes(small_bundle)
    loaded = 0
    # A slice (600 flips, 200 cuts, 150 edits; 1500, 500 and 300 took 15 s of the suite): the scale runs are
    # scripts/fuzz_bundle.py's
    for _ in range(600):  # random byte flips, half of them in the header and manifest
        blob = bytearray(small_bundle)
        limit = HEADER.size + length if rng.random() < 0.5 else len(blob)
        for pos in rng.integers(0, limit, rng.integers(1, 4)):
            blob[pos] ^= int(rng.integers(1, 256))
        try:
            bundle = load_bytes(bytes(blob))
        except BundleError:
            continue
        loaded += 1  # a flip in padding between members: nothing the reader uses may differ
        assert bundle.manifest == reference.manifest
        got, expected = bundle.bases.tensors(), reference.bases.tensors()
        assert all(np.array_equal(got[k], expected[k]) for k in expected)
    assert loaded < 40   # flips that land in padding only: few
    for cut in rng.integers(0, len(small_bundle), 200):
        with pytest.raises(BundleError):
            load_bytes(small_bundle[:cut])
    for _ in range(150):  # re-signed JSON edits: a value replaced by another type
        m = json.loads(json.dumps(manifest))
        section = m[rng.choice(["architecture", "mixer", "preprocessing", "text_encoder"])]
        key = rng.choice(sorted(section))
        section[key] = [None, -1, "x", 1.5, {}, [], 10**20, True, float("nan")][int(rng.integers(9))]
        try:
            load_bytes(with_manifest(small_bundle, m, length))
        except BundleError:
            pass


def test_a_flipped_manifest_byte_is_caught_by_its_checksum(small_bundle):
    _, length = manifest_of(small_bundle)
    blob = bytearray(small_bundle)
    blob[HEADER.size + length // 2] ^= 0x01
    with pytest.raises(BundleError, match="manifest checksum"):
        load_bytes(bytes(blob))


def test_header_checks(small_bundle):
    for blob, match in ((b"", "too short"), (b"NOTABNDL" + small_bundle[8:], "magic"),
                        (small_bundle[:8] + struct.pack("<I", 7) + small_bundle[12:], "version 7"),
                        (small_bundle[:8] + struct.pack("<I", 1) + small_bundle[12:], "version 1.*taper-sdk 0.1"),
                        (small_bundle[:12] + struct.pack("<I", 1) + small_bundle[16:], "reserved"),
                        (small_bundle[:60] + b"\1" + small_bundle[61:], "reserved"),
                        (small_bundle[:16] + struct.pack("<Q", 2**40) + small_bundle[24:], "manifest length")):
        with pytest.raises(BundleError, match=match):
            parse_manifest(np.frombuffer(blob, np.uint8)) if blob else load_bytes(blob)
    assert HEADER.size == 64


def f32_member_edit(name, tensor, value):
    """A mutate() that sets the first float of `tensor` in a safetensors member to `value`."""
    def mutate(member: bytearray) -> None:
        (n,) = struct.unpack("<Q", member[:8])
        begin = json.loads(member[8:8 + n])[tensor]["data_offsets"][0]
        member[8 + n + begin:8 + n + begin + 4] = struct.pack("<f", value)
    return mutate


@pytest.mark.parametrize("member,tensor", [("bases.safetensors", "layer1.0.conv1.weight"),
                                           ("bases.safetensors", "layer3.1.conv2.channels"),
                                           ("mixer.safetensors", "head.bias"),
                                           ("class_embeddings.safetensors", "text")])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weights_are_rejected_when_verifying(small_bundle, member, tensor, value):
    blob = with_member(small_bundle, member, f32_member_edit(member, tensor, value))
    with pytest.raises(BundleError, match="NaN or infinite"):
        load_bytes(blob)
    load_bytes(blob, verify=False)  # verify=False is for trusted files: it does not look


def header_edit(tensor, shape):
    def mutate(member: bytearray) -> None:
        (n,) = struct.unpack("<Q", member[:8])
        header = json.loads(member[8:8 + n])
        header[tensor]["shape"] = shape
        raw = json.dumps(header, separators=(",", ":")).encode()
        member[8:8 + n] = raw + b" " * (n - len(raw))
    return mutate


@pytest.mark.parametrize("shape", [[2**32, 2**32], [2**62, 4], [0, 2**40], [3, -1]])
def test_tensor_shapes_whose_product_would_overflow_are_rejected(small_bundle, shape):
    with pytest.raises(BundleError):
        load_bytes(with_member(small_bundle, "mixer.safetensors", header_edit("head.bias", shape)))


@pytest.mark.parametrize("classes_json", [
    b'{"classes": [], "supercategories": {}}', b"\xff\xfe", b"[" * 1000 + b"]" * 1000,
    b'{"classes": 1, "supercategories": {}}', b'{"supercategories": {}}',
    b'{"classes": [{"id": "a", "name": "b", "path": ["x"]}], "supercategories": {"g": "abc"}}',
])
def test_bad_classes_json_is_a_bundle_error(small_bundle, classes_json):
    from export.bundle_edits import with_member_bytes

    with pytest.raises(BundleError, match="classes.json"):
        load_bytes(with_member_bytes(small_bundle, "classes.json", classes_json))


@pytest.mark.parametrize("name", sorted(HOSTILE_CONCEPTS))
def test_bad_concepts_are_bundle_errors(small_bundle, name):
    with pytest.raises(BundleError, match="classes.json|class_embeddings"):
        load_bytes(with_classes_json(small_bundle, HOSTILE_CONCEPTS[name]))


def test_a_concepts_kinds_load_at_their_bounds_and_a_concept_without_them_has_none(small_bundle):
    """Rule 4b's names (issue 72): optional; 1 to MAX_CONCEPT_KINDS names of at most MAX_NAME_CHARS code points
    (export.golden.kinds_limits, which the Java core reads too; one past each bound is a BundleError there)."""
    from export.golden import kinds_limits
    from sdk.format.bundle import MAX_CONCEPT_KINDS, MAX_NAME_CHARS

    plain = load_bytes(small_bundle)
    assert all(c.kinds == [] for c in plain.concepts)
    cases = dict(kinds_limits(small_bundle))
    kinds = load_bytes(cases["kinds_at_limit"]).concepts[0].kinds
    assert len(kinds) == MAX_CONCEPT_KINDS and kinds[-1] == "é" * MAX_NAME_CHARS
    for past in ("kinds_past_count", "kinds_past_length"):
        with pytest.raises(BundleError, match="kind names"):
            load_bytes(cases[past])


@pytest.mark.parametrize("tensor", ["text", "concepts"])
@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_non_finite_class_or_concept_embeddings_are_bundle_errors(small_bundle, tensor, value):
    """(The 10,000-case reliability run found non-finite concept embeddings loading: they were not verified.)"""
    from export.bundle_edits import with_member_bytes
    from sdk.format.bundle import safetensors_bytes
    from sdk.format.tensorfile import read_tensors

    m, _ = manifest_of(small_bundle)
    entry = m["members"]["class_embeddings.safetensors"]
    tensors = {k: np.array(v) for k, v in
               read_tensors(small_bundle[entry["offset"]:entry["offset"] + entry["size"]])[0].items()}
    tensors[tensor][1, 3] = value
    blob = with_member_bytes(small_bundle, "class_embeddings.safetensors", safetensors_bytes(tensors))
    with pytest.raises(BundleError, match=f"class_embeddings.safetensors:{tensor} holds NaN or infinite"):
        load_bytes(blob)
    load_bytes(blob, verify=False)  # the documented opt-out: the caller trusts the file


def test_concepts_and_the_format_version_must_agree(small_bundle):
    """Version 5 needs concepts (and their embeddings); a version 4 bundle may not have them."""
    assert load_bytes(small_bundle).manifest.version == 5
    # The writer stamps 3 when classes.json has no concepts; the embeddings' extra tensor is then refused.
    without = with_classes_json(small_bundle, lambda s: s.pop("concepts"))
    with pytest.raises(BundleError, match="class_embeddings.safetensors: tensors differ.*unexpected \\['concepts'\\]"):
        load_bytes(without)
    # A header and manifest that say 4 over a classes.json with concepts.
    m, _ = manifest_of(small_bundle)
    blob = with_manifest(small_bundle[:8] + struct.pack("<I", 4) + small_bundle[12:], {**m, "version": 4})
    with pytest.raises(BundleError, match="exactly \\['classes', 'supercategories'\\] \\(format version 4\\)"):
        load_bytes(blob)


def test_a_bundle_without_concepts_is_version_3_and_resolves_by_path_nodes(tiny_run, tmp_path):
    import sdk

    manifest, members = run_contents(tiny_run)
    path = write_bundle(tmp_path / "v3.taper", manifest, without_concepts(members))
    bundle = Bundle.open(path)
    assert bundle.manifest.version == 3 and bundle.concepts == [] and bundle.concept_embeddings.shape[0] == 0
    assert set(sdk.load(path).resolver.resolve("disc").classes.tolist()) == {0, 1, 2, 3}


def test_writing_refuses_missing_members_before_touching_the_disk(tiny_run, tmp_path):
    manifest, members = run_contents(tiny_run)
    members.pop("NOTICE")
    with pytest.raises(BundleError, match="exactly the members"):
        write_bundle(tmp_path / "x.taper", manifest, members)
    assert list(tmp_path.iterdir()) == []


def test_open_names_the_file(tmp_path):
    with pytest.raises(BundleError, match="missing.taper"):
        Bundle.open(tmp_path / "missing.taper")
    (tmp_path / "junk.taper").write_bytes(b"junk" * 100)
    with pytest.raises(BundleError, match="junk.taper.*magic"):
        Bundle.open(tmp_path / "junk.taper")
    with pytest.raises(BundleError, match="not a regular file"):
        Bundle.open(tmp_path)


# Compact bundles (format version 3, or 4 with subspace layers; without concepts, which would make them 5):
# the bases as a shared part plus deltas, in every storage kind.

@pytest.fixture(scope="module")
def compact_parts(tiny_run):
    """The tiny run's manifest and members with the stand-in encoder, and a function that stores its bases
    as a given mode with the tensors edited by `edit(tensors)` and the manifest by `edit_manifest(m)`."""
    from dataclasses import replace

    from export.compress import Mode, compress
    from sdk.format.bundle import bases_bytes, tensors_member
    from sdk.fusion.bases import CompactBases

    manifest, members = run_contents(tiny_run)
    members = without_concepts(members)
    members["text_encoder.onnx"], members["tokenizer.json"] = b"stand-in", b"{}"
    full = load_bytes(bundle_bytes(manifest, members)).bases
    rows = full.block_rows()

    def build(mode, edit=None, edit_manifest=None) -> bytes:
        bases = compress(CompactBases.full(rows, full.shapes), Mode.parse(mode))
        member = bases_bytes(bases)
        if edit is not None:
            tensors = dict(bases.tensors())
            edit(tensors)
            member = tensors_member(tensors)
        m = replace(manifest, bases=bases.storage, provenance={**manifest.provenance, "pad": "x" * PAD})
        blob = bundle_bytes(m, {**members, "bases.safetensors": member})
        if edit_manifest is not None:
            j, length = manifest_of(blob)
            edit_manifest(j)
            blob = with_manifest(blob, j, length)
        return blob

    return build


@pytest.mark.parametrize("mode", ["fp16", "delta", "int8+fp16", "lowrank:2", "drop:0.5+lowrank:2+fp16",
                                  "subspace:4+fp16"])
def test_compact_bundles_load_and_mix_like_their_reference(compact_parts, mode):
    blob, plain_blob = compact_parts(mode), compact_parts("fp32")
    bundle, plain = load_bytes(blob), load_bytes(plain_blob)
    assert bundle.manifest.version == (4 if "subspace" in mode else 3)   # the lowest version that holds it
    assert len(blob) < len(plain_blob) or mode == "delta"
    alpha = np.full((4, 3), 1 / 3, np.float32)
    got, expected = bundle.bases.mixed(alpha), plain.bases.mixed(alpha)
    tolerance = {"fp16": 1e-2, "delta": 1e-5}.get(mode, 0.5)  # low rank and drop are lossy by design
    assert max(float(np.abs(got[k] - expected[k]).max()) for k in expected) < tolerance


def scale_edit(value):
    def edit(tensors):
        key = next(k for k in tensors if k.endswith(".scale"))
        tensors[key] = np.array(tensors[key])
        tensors[key][0] = value
    return edit


def rename(old_suffix, new):
    def edit(tensors):
        key = next(k for k in tensors if k.endswith(old_suffix))
        tensors[new(key)] = tensors.pop(key)
    return edit


def reshape_last(suffix, cut):
    def edit(tensors):
        key = next(k for k in tensors if k.endswith(suffix))
        tensors[key] = np.ascontiguousarray(tensors[key][..., :cut])
    return edit


COMPACT_DAMAGE = [  # (mode, tensor edit, manifest edit, what the error names)
    ("int8", scale_edit(float("nan")), None, "NaN"),
    ("int8", scale_edit(float("inf")), None, "NaN"),
    ("int8", scale_edit(-1.0), None, "negative"),
    ("int8", reshape_last(".scale", 3), None, "scale"),                    # scales of the wrong length
    ("lowrank:2", reshape_last(".u", 1), None, ".u"),                      # factors of the wrong rank
    ("lowrank:2", None, lambda m: m["bases"]["layer1.0.conv1"].update(rank=3), ".u"),
    ("lowrank:2", None, lambda m: m["bases"]["layer1.0.conv1"].update(rank=10**6), "rank"),
    ("lowrank:2", None, lambda m: m["bases"]["fc"].update(rank=0), "rank"),
    ("subspace:2", reshape_last(".v", 1), None, ".v"),                    # a shared factor of the wrong width
    ("subspace:2", lambda t: t.update({"fc.v": np.repeat(t["fc.v"][None], 3, 0)}), None, "fc.v"),   # per basis
    ("subspace:2", None, lambda m: m["bases"]["fc"].update(kind="lowrank"), "fc"),   # kind and tensors disagree
    ("delta", rename(".delta", lambda k: "layer9.0.conv1.delta"), None, "missing"),   # a delta of no layer
    ("delta", lambda t: t.update({"layer9.0.conv1.delta": t["fc.delta"]}), None, "no layer"),
    ("delta", None, lambda m: m["bases"].update({"layer9.0.conv1": {"kind": "dense", "dtype": "float32",
                                                                      "rank": 0}}), "unknown"),
    ("delta", None, lambda m: m["bases"].pop("fc"), "fc"),
    ("delta", None, lambda m: m["bases"]["fc"].update(kind="sparse"), "kind"),
    ("delta", None, lambda m: m["bases"]["fc"].update(dtype="float64"), "dtype"),
    ("delta", None, lambda m: m["bases"]["fc"].update(kind="int8"), "fc"),   # kind and tensors disagree
    ("delta+fp16", lambda t: t.update({"fc.delta": t["fc.delta"].astype(np.float32)}), None, "fc.delta"),
    ("drop:0.99", lambda t: t.update({"fc.channels": np.repeat(t["fc.channels"], 3, 0)}), None, "fc.channels"),
]


@pytest.mark.parametrize("mode,edit,edit_manifest,match", COMPACT_DAMAGE)
def test_bad_compact_bundles_raise_bundle_error(compact_parts, mode, edit, edit_manifest, match):
    with pytest.raises(BundleError, match=match):
        load_bytes(compact_parts(mode, edit, edit_manifest))


def test_a_subspace_layer_needs_version_4_and_header_and_manifest_agree(compact_parts):
    blob = compact_parts("subspace:2")
    assert struct.unpack("<I", blob[8:12])[0] == 4
    with pytest.raises(BundleError, match="needs format version 4"):
        load_bytes(compact_parts("subspace:2", None, lambda m: m.update(version=3)))
    with pytest.raises(BundleError, match="differs from the header"):
        load_bytes(compact_parts("delta", None, lambda m: m.update(version=4)))


def test_a_version_2_bundle_is_refused_naming_its_version(small_bundle):
    blob = small_bundle[:8] + struct.pack("<I", 2) + small_bundle[12:]
    with pytest.raises(BundleError, match="version 2.*taper-sdk 0.2.*export the run again"):
        load_bytes(blob)


def test_a_negative_running_variance_is_refused_where_no_checksum_can_catch_it(tiny_bundle):
    """A forger's bundle (checksums recomputed) with one negative batch-norm variance in the mixer or in a
    basis loads otherwise, and then every probability is NaN (issue 49)."""
    from sdk.format.bundle import bundle_members, replace_member, safetensors_bytes, tensors_member

    blob = tiny_bundle.read_bytes()
    bundle = Bundle.open(tiny_bundle)
    mixer = {k: np.array(v) for k, v in bundle.mixer.items()}
    name = next(k for k in mixer if k.endswith("running_var"))
    mixer[name][0] = -1.0
    with pytest.raises(BundleError, match=f"{name} holds negative running variances"):
        Bundle.from_buffer(np.frombuffer(replace_member(blob, "mixer.safetensors", safetensors_bytes(mixer)), np.uint8))
    tensors = {k: np.array(v) for k, v in bundle.bases.tensors().items()}
    layer = next(lb for lb in bundle.bases.layers if any(c.endswith("running_var") for c in lb.layer.channels))
    index = [c.endswith("running_var") for c in layer.layer.channels].index(True)
    tensors[f"{layer.layer.name}.channels"][-1, index, 0] = -0.5
    manifest, members = bundle_members(blob)
    forged = bundle_bytes(manifest, {**members, "bases.safetensors": tensors_member(tensors)})
    with pytest.raises(BundleError, match="negative running variances"):
        Bundle.from_buffer(np.frombuffer(forged, np.uint8))


def test_a_members_sha256_is_the_manifests_only_where_the_checksums_were_verified(tiny_bundle):
    """Bundle.member_sha256 keys the encoder's checks and cache: of the bytes the bundle holds. Opened with
    `verify`, the manifest's (checked against them); without, the bytes hashed, not the manifest's claim."""
    import hashlib

    data = bytearray(tiny_bundle.read_bytes())
    manifest = parse_manifest(np.frombuffer(bytes(data), np.uint8))
    verified = Bundle.open(tiny_bundle)
    for name in ("text_encoder.onnx", "tokenizer.json"):
        assert verified.member_sha256(name).hex() == manifest.members[name].sha256
    entry = manifest.members["tokenizer.json"]
    data[entry.offset + entry.size // 2] ^= 0x20     # the member changed, its checksum not redone
    with pytest.raises(BundleError, match="checksum mismatch"):
        Bundle.from_buffer(np.frombuffer(bytes(data), np.uint8))
    unchecked = Bundle.from_buffer(np.frombuffer(bytes(data), np.uint8), verify=False)
    digest = unchecked.member_sha256("tokenizer.json")
    assert digest == hashlib.sha256(data[entry.offset:entry.offset + entry.size]).digest()
    assert digest.hex() != entry.sha256
