"""The public API: load a bundle, personalize it for a description.

>>> import sdk
>>> bundle = sdk.load("tiny-imagenet.taper")           # doctest: +SKIP
>>> model = sdk.personalize(bundle, "insects")         # doctest: +SKIP
>>> model.classes, model.timings                       # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from sdk.adapt import AdaptRule, adapt_stream
from sdk.engines import device_cache
from sdk.engines.int8 import WEIGHT_QMAX, WEIGHT_QMIN, Int8Plan
from sdk.engines.onnxruntime import BackboneEngine
from sdk.engines.rest import REST_ID, REST_INDEX, REST_LABEL, RestNetwork, rest_head
from sdk.engines.xnnpack_program import default_path as default_program_path
from sdk.errors import DescriptionError, SdkError
from sdk.fewshot import enroll
from sdk.format.bundle import Bundle
from sdk.format.graph_check import check_backbone_graph, check_encoder_graph
from sdk.format.signing import Signer, trusted_set
from sdk.format.tokenizer_check import check_tokenizer_json
from sdk.fusion.architecture import NUM_BLOCKS
from sdk.fusion.folding import fold_batch_norm
from sdk.fusion.mixer import predict_alpha, uniform_alpha
from sdk.fusion.plan import Placement
from sdk.media.files import user_path
from sdk.model import PersonalizedModel
from sdk.prototypes import DEFAULT_TEMPERATURE
from sdk.stopwatch import Stopwatch
from sdk.text import encoder_cache
from sdk.text.encoder import TextEncoder, shared_encoder
from sdk.text.resolver import TaskOptions, TaskResolver

PRECISIONS = ("float32", "int8")   # what personalize() builds (sdk.engines.int8 for int8)

class PhraseEmbedder:
    """The bundle's text encoder, created on first use, and how a description is embedded. Holds the
    Bundle but not the TaperBundle, so that TaperBundle -> resolver -> embedder is no reference cycle (a
    dropped bundle is then freed at once, without the garbage collector)."""

    def __init__(self, bundle: Bundle, cache: bool = True):
        self.bundle, self._encoder, self._lock = bundle, None, threading.Lock()
        # The encoder's compiled session is kept in the device cache (sdk/text/encoder_cache.py), keyed by its graph.
        self._cache_key = encoder_cache.entry_key(bundle.manifest.members["text_encoder.onnx"].sha256) \
            if cache and device_cache.enabled() else None
        # Checked at load, so a hostile graph or tokenizer fails there, not at the first free-text description;
        # the session itself is created on first use (~0.2 s). The checks remember passes by the bytes' digests,
        # and the shared encoder is keyed by them: of the bytes this bundle holds (Bundle.member_sha256: the
        # manifest's only where the checksums were verified at open, hashed otherwise).
        graph, tokenizer = bundle.member_bytes("text_encoder.onnx"), bundle.member_bytes("tokenizer.json")
        self._digests = (bundle.member_sha256("text_encoder.onnx"), bundle.member_sha256("tokenizer.json"))
        self._graph = check_encoder_graph(graph, self._digests[0])
        self._tokenizer = check_tokenizer_json(tokenizer, self._digests[1])
        self._words: frozenset[str] | None = None

    def is_word(self, word: str) -> bool:
        """Whether `word` is a whole token of the encoder's vocabulary: a real word, which the resolver's
        spelling rule leaves alone ("horse" is not a typo of 'hose'). The vocabulary is read on first use."""
        with self._lock:
            if self._words is None:
                raw = self.bundle.member_bytes("tokenizer.json")   # checked at load (check_tokenizer_json)
                self._words = frozenset(json.loads(raw)["model"]["vocab"])
            return word in self._words

    @property
    def encoder(self) -> TextEncoder:
        with self._lock:
            if self._encoder is None:
                spec, embed_dim = self.bundle.manifest.text_encoder, self.bundle.manifest.mixer.embed_dim
                graph, tokenizer = self._graph, self._tokenizer
                key = (*self._digests, spec.max_tokens, embed_dim, self._cache_key)
                self._encoder = shared_encoder(key, lambda: TextEncoder.from_checked_members(
                    graph, tokenizer, spec.max_tokens, embed_dim, self._cache_key))
                self._graph = self._tokenizer = None  # the session holds its own copy (23 MB for MiniLM)
            return self._encoder

    def __call__(self, phrase: str) -> np.ndarray:
        # A description is embedded with the ensemble's first prompt only (the class embeddings use all
        # of them): 4 ms instead of 17-27 ms per description, and as good at finding the meant class
        # (Tiny ImageNet, 200 WordNet glosses: the class ranks first 61.5% vs 61.0% of the time with all
        # 8 prompts; 92 synonyms: 66.3% both; docs/results/description_calibration.md).
        return self.encoder.embed_class_names([phrase], self.bundle.manifest.text_encoder.prompts[:1])[0]


def reads_mapped_file(method):
    """The one guard of every public TaperBundle method that reads the bundle's mapped file (personalize,
    generic, the classifier for adapt and few-shot, the weights for exports; the mixer is read through
    personalize and few-shot enrollment, both checked): BundleError if the file
    was truncated or rewritten since it was loaded, instead of reading the mapping (a truncated mapping
    kills the process with SIGBUS). A change in the instant between the check and the read is not caught;
    `sdk.load(..., in_memory=True)` is immune to both."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        self.bundle.check_unchanged()
        return method(self, *args, **kwargs)
    return guarded


class TaperBundle:
    """A loaded bundle plus what personalizing needs (text encoder and engine, created on first use)."""

    def __init__(self, bundle: Bundle, providers: Sequence[str] | None = None, threads: int | None = None,
                 device_compile: bool = True, cache: bool = True):
        self.bundle = bundle
        self.cache = cache
        m = bundle.manifest
        self.num_bases, self.mixer_spec = m.num_bases, m.mixer
        self.preprocessing = m.preprocessing
        graph = check_backbone_graph(bundle.member_bytes("backbone.onnx"), bundle.backbone_layout,
                                     m.preprocessing.input_size)
        use_cache = cache and device_compile and device_cache.enabled()
        key = device_cache.entry_key(bundle.manifest_sha256) if use_cache else None
        self.engine = BackboneEngine(graph, bundle.bases, bundle.backbone_layout, bundle.backbone_size,
                                     self.preprocessing.input_size, providers, threads, device_compile, key)
        self.prompts = m.text_encoder.prompts
        self._compile_lock = threading.Lock()
        self._int8_lock, self._int8_buffer = threading.Lock(), None   # precision="int8": one float buffer
        self._int8_plan: Int8Plan | None = None   # ... and the int8 graph's layout, made on first use
        self._int8_fusion: tuple[object, set[str]] = (None, set())   # ... its fusion, the weights quantized before
        self._int8_folded: dict[str, np.ndarray] = {}                 # ... and the buffer's folded tensors
        self.embedder = PhraseEmbedder(bundle, cache)
        self.resolver = TaskResolver(bundle.classes, bundle.class_embeddings, bundle.supercategories, self.embedder,
                                     bundle.concepts, bundle.concept_embeddings, is_word=self.embedder.is_word)

    @property
    def classes(self) -> list[str]:
        return [c.name for c in self.bundle.classes]

    @property
    def signer(self) -> Signer | None:
        """Who signed the bundle (its signature verified at load), or None: `sdk.format.signing.Signer`."""
        return self.bundle.signer

    @property
    def encoder(self) -> TextEncoder:
        """The bundle's text encoder (created on first use; BundleError if its graph or tokenizer is not
        one the SDK exports)."""
        return self.embedder.encoder

    def __repr__(self) -> str:
        return f"TaperBundle({self.bundle!r}, route={self.engine.route!r})"

    def warm_up(self, precision: str = "float32") -> TaperBundle:
        """Do the one-time work now instead of in the first `personalize`: create the text encoder's
        session and compile the backbone for this device, reordering the bases into its layout. A later
        process takes both from the device cache (sdk/engines/device_cache.py, sdk/text/encoder_cache.py) and only
        reorders the bases; the costs are in docs/results/warm_start.md (scripts/bench_warm_start.py).
        With precision="int8", also the int8 models' plan and session route (`sdk.engines.int8_session`; the route
        is kept in the device cache too, sdk/engines/int8_route_cache.py: ~0.3 s at full width the first time).

        >>> bundle = sdk.load("tiny-imagenet.taper").warm_up(precision="int8")   # doctest: +SKIP
        """
        if precision not in PRECISIONS:
            raise DescriptionError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self._warm_up()
        if precision == "int8" and self.engine.int8_sessions is None:
            # A model of the probe mixer, then dropped: what remains is the plan, its buffer and the route.
            self._int8_model(np.arange(min(2, len(self.bundle.classes))), self.probe_alpha(), [], Stopwatch())
        return self

    def _warm_up(self) -> None:
        self.bundle.check_unchanged()
        if self.engine.compile_tried or self.engine.compile_is_cached():
            # Both short (~0.1 s): side by side on two cores they only slow each other (128 against 147 ms at
            # full width; docs/results/experiments.md, 'Warm start, fourth look').
            _ = self.encoder
            self.compile_engine()
            return
        # The compile is the long part (~0.6 s at full width): the encoder is created beside it (onnxruntime
        # releases the GIL), and so is most of what writing the encoder's cache entry costs.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="taper-warm-up") as pool:
            encoder = pool.submit(lambda: self.encoder)
            self.compile_engine()
            encoder.result()

    def use_executorch(self, program: str | Path) -> TaperBundle:
        """Personalize with ExecuTorch from now on: the companion XNNPACK program at `program`
        (`sdk.engines.xnnpack_program`, written by `python -m export executorch BUNDLE`). A bundle loaded with
        `trusted_keys` takes only a companion signed by one of them; without them, the companion is first
        run in a probe process and checked against the onnxruntime engine (`sdk.engines.companion_check`)."""
        from sdk.engines.companion_check import check_companion
        from sdk.engines.executorch import ExecutorchRoute
        from sdk.engines.xnnpack_program import companion_target, read_companion

        companion = read_companion(user_path(program, "the companion's path"), *companion_target(self.bundle),
                                   self.bundle.trusted_keys)
        route = ExecutorchRoute(companion, self.engine.standard, self.bundle.bases)
        if self.bundle.trusted_keys is None:  # no signer the caller trusts vouches for the program
            check_companion(route, self.engine.standard, self.probe_alpha(), self.preprocessing.input_size,
                            self.bundle.manifest_sha256, self.cache)
        self.engine.use(route)
        return self

    def probe_alpha(self) -> np.ndarray:
        """A fixed mixer [4, Q] for checking one route against another: distinct weights per basis and
        block, so that a basis or block put in the wrong place shows."""
        weights = np.arange(1, NUM_BLOCKS * self.num_bases + 1, dtype=np.float32).reshape(NUM_BLOCKS, -1)
        return weights / weights.sum(1, keepdims=True)

    def compile_engine(self) -> bool:
        """Compile the backbone for this device unless done; True if it was done now."""
        with self._compile_lock:
            if self.engine.compile_tried:
                return False
            self.engine.compile(self.probe_alpha())
            return True

    @reads_mapped_file
    def personalize(self, description: str | Sequence[str], options: TaskOptions | None = None,
                    precision: str = "float32") -> PersonalizedModel:
        if precision not in PRECISIONS:
            raise DescriptionError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        options = options or TaskOptions()
        watch = Stopwatch()
        task = self.resolver.resolve(description, options)
        watch.lap("resolve")
        resolve = watch.timings.pop("resolve")  # the text encoder's share (0 for names and groups) and the rest
        watch.timings.update(encode=task.encode_ms, resolve=round(resolve - task.encode_ms, 3))
        alpha = self.alpha_for(task.embedding)
        watch.lap("mixer")
        if precision == "int8":
            return self._int8_model(task.classes, alpha, task.how, watch)
        return self._model(task.classes, alpha, task.how, watch)

    def alpha_for(self, embedding: np.ndarray) -> np.ndarray:
        """The mixer's alpha [4, Q] for a task embedding."""
        spec = self.mixer_spec
        return predict_alpha(self.bundle.mixer, spec.layers, spec.blocks, self.num_bases, embedding)

    @reads_mapped_file
    def generic(self) -> PersonalizedModel:
        """The model for no task in particular: every class, the uniform mix of the bases (where
        self-improvement starts, `PersonalizedModel.adapt`)."""
        return self._model(np.arange(len(self.bundle.classes)), uniform_alpha(self.num_bases),
                           ["generic: every class, the uniform mix of the bases"], Stopwatch())

    def _model(self, classes: np.ndarray, alpha: np.ndarray, how: list[str], watch: Stopwatch) -> PersonalizedModel:
        """Fuse, fold and open the network of `alpha` with the head rows of `classes`, timed by `watch`."""
        if self.compile_engine():
            watch.lap("compile")  # once per bundle, unless warm_up() did it
        with self.engine.weight_buffer() as target:
            self.engine.fuse_and_fold(alpha, target)
            watch.lap("fuse_fold")  # one pass on the compiled route: each tile is folded right after its GEMV
            head_weight, head_bias = self._head_rows(target.head, classes)   # copies
            network = self.engine.open(target, head_weight, head_bias)
            watch.lap("session")  # the compiled route creates none: it binds the weights to the shared session
        return self._personalized(network, head_weight, head_bias, classes, alpha, how, watch)

    def _head_rows(self, head: tuple[np.ndarray, np.ndarray], classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The classifier rows a task's model holds: its classes', or for one class alone `rest_head`'s."""
        if self._one_class(classes):
            return rest_head(head[0], head[1], int(classes[0]))
        return head[0][classes], head[1][classes]   # fancy indexing: copies

    def _one_class(self, classes: np.ndarray) -> bool:
        return len(classes) == 1 and len(self.bundle.classes) > 1

    def _personalized(self, network, head_weight: np.ndarray, head_bias: np.ndarray, classes: np.ndarray,
                      alpha: np.ndarray, how: list[str], watch: Stopwatch) -> PersonalizedModel:
        """The model of a network and its rows; a task of one class answers it or `REST_LABEL` (`sdk.engines.rest`)."""
        infos = [self.bundle.classes[i] for i in classes]
        names, ids = [c.name for c in infos], [c.id for c in infos]
        if self._one_class(classes):
            others = len(self.bundle.classes) - 1
            how = [*how, f"one class: '{names[0]}', or {REST_LABEL} (the bundle's {others} other classes)"]
            network, classes = RestNetwork(network), np.array([classes[0], REST_INDEX])
            names, ids = [*names, REST_LABEL], [*ids, REST_ID]
        return PersonalizedModel(network, head_weight, head_bias, classes, names, ids, self.preprocessing, alpha,
                                 watch.total(), how, self)

    def _int8_model(self, classes: np.ndarray, alpha: np.ndarray, how: list[str], watch: Stopwatch
                    ) -> PersonalizedModel:
        """The network of `alpha` quantized to int8 without photos (`sdk.engines.int8`), in a session of its own.
        The float weights come from the standard route's fusion (the plain layout, one buffer reused under a
        lock); quantizing them and the session are per model (docs/results/int8_runtime.json: what it costs)."""
        engine = self.engine
        with self._int8_lock:
            if self._int8_buffer is None:
                self._start_int8()
            target, (prepared, quantized) = self._int8_buffer, self._int8_fusion
            engine.standard.fuse_and_fold(alpha, target, prepared)
            folded = self._int8_folded
            watch.lap("fuse_fold")
            graph = self._int8_plan.quantize(folded, self.bundle.bases.mixed_channels(alpha), quantized=quantized)
            head_weight, head_bias = self._head_rows(target.head, classes)   # copies
        watch.lap("quantize")
        network = engine.open_int8(self._int8_plan, graph, head_weight, head_bias)
        watch.lap("session")
        model = self._personalized(network, head_weight, head_bias, classes, alpha, how, watch)
        model.precision, model.int8_graph = "int8", graph
        return model

    def _start_int8(self) -> None:
        """The int8 models' float buffer, plan and fusion (under the int8 lock). A fusion that quantizes as it
        fuses (the native kernel) writes the mixed layers' int8 weights; a shared layer's are quantized here,
        once: its folded weight is the same in every model."""
        engine = self.engine
        target, plan = engine.standard.new_buffer(), Int8Plan(engine.graph, self.preprocessing)
        prepared, fused = engine.standard.quantizing(plan.weight_outputs(), WEIGHT_QMIN, WEIGHT_QMAX) or (None, set())
        folded = {name: Placement(name, tuple(e["shape"]), e["offset"] // 4).view_of(target.graph_data)
                  for name, e in engine.layout.items()}
        shared = [weight for weight, _, _, _ in plan.convs if weight not in engine.standard.mixed_weights()]
        plan.quantize_weights(folded, shared)
        self._int8_buffer, self._int8_plan, self._int8_folded = target, plan, folded
        self._int8_fusion = (prepared, fused | set(shared))

    @reads_mapped_file
    def mixed_head(self, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The classifier of every class, mixed with alpha [4, Q]: (weight [K, C], bias [K])."""
        return self.bundle.bases.mixed_head(alpha)

    @reads_mapped_file
    def fused_weights(self, alpha: np.ndarray) -> dict[str, np.ndarray]:
        """Every weight of the network mixed with alpha [4, Q], by state-dict name, unfolded (the reference
        fusion, `sdk.fusion.bases.CompactBases.mixed`: for exports and checks, not the personalize() path)."""
        return self.bundle.bases.mixed(alpha)

    @reads_mapped_file
    def folded_weights(self, weights: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Batch norm folded into the convs, in a buffer of the plain backbone graph's layout (what the
        exporters and the mobile mirror's golden files use; personalize() folds into the engine's route)."""
        buffer, views = self.engine.plain_weight_file()
        fold_batch_norm(weights, views)
        return buffer, views


ENGINES = ("onnxruntime", "executorch")


def load(path: str | Path, verify: bool = True, providers: Sequence[str] | None = None,
         threads: int | None = None, device_compile: bool = True, in_memory: bool = False,
         engine: str = "onnxruntime", program: str | Path | None = None, cache: bool = True,
         trusted_keys: Iterable[str | bytes | os.PathLike] | None = None) -> TaperBundle:
    """Open and validate a bundle, ready to personalize.

    >>> bundle = sdk.load("tiny-imagenet.taper")     # doctest: +SKIP

    Args:
        path: the `.taper` file (docs/bundle-format.md).
        verify: check every member's SHA-256 (one pass over the file) and that every weight is finite (a
            second pass over the weights); False only for files you already trust.
        providers: onnxruntime execution providers (default: TensorRT/CUDA/CoreML when installed, else CPU).
        threads: intra-op threads of the backbone's onnxruntime sessions (default: onnxruntime's choice).
        device_compile: False keeps onnxruntime's standard route (a session per model, optimized from the
            plain graph): slower to personalize, for comparison and debugging; see `sdk.engines.onnxruntime`.
        in_memory: read the file into memory instead of mapping it. A mapped bundle that is truncated or
            rewritten on disk is detected at the next `personalize` (BundleError); in memory, later changes
            to the file cannot matter.
        engine: "onnxruntime" (default) or "executorch": personalized models run the bundle's ExecuTorch
            companion, an XNNPACK program (`sdk.engines.executorch`; needs the executorch package).
        program: the companion's path for engine="executorch" (default: `<path>.xnnpack`).
        cache: keep what compiling the backbone and the text encoder for this device computes in the
            user's cache folder and reuse it in later processes (`sdk.engines.device_cache`, `sdk.text.encoder_cache`:
            keyed by the bundle or its encoder, onnxruntime and the CPU, checked when read); False neither
            reads nor writes it.
        trusted_keys: public keys (64 hex digits as in a `.pub` file, 32 raw bytes, or a `.pub` path):
            accept only a bundle signed by one of them (`python -m export sign`), and check its members'
            SHA-256 whatever `verify` says; with engine="executorch", its companion too must be signed by
            one of them. None (the default): signed and unsigned files load, and `bundle.signer` says who
            signed (a signature present is always checked).
    Returns:
        A TaperBundle (`personalize` it).
    Raises:
        BundleError: the file (or the ExecuTorch companion) is missing, damaged, of another format
            version, or inconsistent; with trusted_keys, unsigned, badly signed or signed by another key
            (the message says which).
        SdkError: an unknown engine, or engine="executorch" without the executorch package.
    """
    if engine not in ENGINES:
        raise SdkError(f"engine must be one of {ENGINES}, got {engine!r}")
    if program is not None and engine != "executorch":
        raise SdkError("program= names the ExecuTorch companion: it needs engine='executorch'")
    path = user_path(path, "the bundle's path")
    program = None if program is None else user_path(program, "program= (the companion's path)")
    trusted = None if trusted_keys is None else trusted_set(trusted_keys)
    bundle = TaperBundle(Bundle.open(path, verify, in_memory, trusted), providers, threads, device_compile, cache)
    if engine == "executorch":
        bundle.use_executorch(program if program is not None else default_program_path(path))
    return bundle


def personalize(bundle: TaperBundle, description: str | Sequence[str] | None = None, *,
                examples: Mapping | None = None, temperature: float = DEFAULT_TEMPERATURE,
                stream: Iterable | None = None, precision: str = "float32", **options) -> PersonalizedModel:
    """A ResNet-18 specialised to what `description` names, or to the classes of a few `examples`.

    >>> model = sdk.personalize(bundle, "insects")   # doctest: +SKIP
    >>> model.classes, model.predict("photo.jpg")    # doctest: +SKIP
    >>> mine = sdk.personalize(bundle, examples={"my moth": moths, "other moth": others})  # doctest: +SKIP

    Args:
        bundle: from `sdk.load`.
        description: free text ("insects", "a drinking glass with a stem"), a comma list, or a list of
            class names (`bundle.classes`). With `examples`, optional: it adds the mixer's prediction for
            it to the candidates (`sdk.fewshot`).
        examples: {class name: two or more images (paths, PIL images or arrays)}: few-shot enrollment of
            any classes, seen by the bundle or not; the head is built from class prototypes, or, when
            every name is one of the bundle's classes, is its trained rows if they classify the examples
            at least as well (`sdk.fewshot.choose_head`).
        temperature: the cosine head's scale (examples only; the probabilities, never the argmax).
        precision: "float32" (default) or "int8": the network quantized on the device without photos
            (`sdk.engines.int8`; descriptions only).
        stream: batches of unlabelled images and no description: start from `bundle.generic()` and
            `adapt` to each batch in turn (`sdk.adapt`; options: min_count, max_classes, min_classes,
            pad_to, min_images: the model stays generic until 96 images have been seen).
        **options: max_classes, min_classes, margin, min_contrast, missing ("tell" or "nearest"; see `TaskOptions`).
    Returns:
        A PersonalizedModel: `classes`, `predict`, `predict_proba`, `logits`, `export`, `timings`.
    Raises:
        DescriptionError: the description or an option is invalid, or nothing in the bundle matches.
        ExamplesError: the examples are unusable (fewer than 2 classes, a class with fewer than 2
            images, duplicate names, too many images); ImageError for an image that is not one.
        BundleError: the bundle's file changed on disk since it was loaded.
    """
    if precision != "float32" and (examples is not None or stream is not None):
        raise DescriptionError(f"precision={precision!r} is for descriptions only (not examples or a stream)")
    if stream is not None:
        if description is not None or examples is not None:
            raise DescriptionError("stream= adapts without a description or examples: give only one of them")
        return adapt_stream(bundle, stream, AdaptRule(**_known(options, AdaptRule)))
    options = _known(options, TaskOptions)
    if examples is not None:
        return enroll(bundle, examples, description, TaskOptions(**options), temperature)
    if description is None:
        raise DescriptionError("give a description, examples, or both")
    return bundle.personalize(description, TaskOptions(**options), precision)


def _known(options: dict, kind: type) -> dict:
    """`options` if each is a field of the dataclass `kind`, else DescriptionError naming the others."""
    unknown = sorted(set(options) - set(kind.__dataclass_fields__))
    if unknown:
        raise DescriptionError(f"unknown options {unknown}; known: {sorted(kind.__dataclass_fields__)}")
    return options
