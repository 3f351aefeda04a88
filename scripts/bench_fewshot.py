"""Few-shot benchmark (issue 14): does choosing the network by the leave-one-out proxy help on classes
the bundle never saw? Writes <out>.json and <out>.md.

    python -m scripts.bench_fewshot --run /root/taper-runs/holdout20 --out docs/results/fewshot

The run must be trained with `holdout_classes` (trainer/data/holdout.py lists which). Unseen tasks:
the held-out classes, `shots` support images per class drawn from their training images, queried on
all their val images. With more held-out classes than the run's task size k, each task is a held-out
class and its k - 1 nearest held-out classes in the hierarchy (`unseen_task_sets`). Rows, each with a
cosine prototype head on the support:
- stage1_proto: the stage-1 network's features (torch, from the run);
- uniform_proto: the uniform mix of the bases;
- mixer_names_proto: the mixer's prediction from the class names (no labels needed);
- proxy_selected: what `sdk.personalize(bundle, examples=...)` picks (`sdk.fewshot`: the mixer from the
  names, the uniform mix and each basis, scored by leave-one-out 1-NN accuracy; the mixer's candidate
  unless another is significantly better), with a comparison of other proxy rules on the same picks;
- oracle_selected: the candidate with the best query accuracy (the ceiling of selection; it also picks
  the query set's noise, so it overstates that ceiling);
- oracle_crossval: the same pick made on half of each class's query images and scored on the other half
  (both ways, averaged): the ceiling without that bias;
- fitted_mixture (with --fit-mixture, an experiment): the mixer's alpha fitted to the support images
  (`MixtureFitter`), a candidate beyond the discrete ones.
1-shot: the proxy needs two images per class (the SDK refuses one), so it has no proxy row.
Seen tasks: 20-way tasks of the trained classes (hierarchy neighbourhoods, the report's task sampler),
5-shot support from their training images: proxy_selected vs classifier selection with the stage-1
network (CS), and the mixer's network with its trained head rows (what `sdk.personalize(bundle,
class_names)` builds) for context.
Accuracies are means over tasks with a 95% interval (1.96 standard errors over tasks).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import sdk
from sdk.fewshot import (
    Candidate,
    best,
    candidate_features,
    candidates,
    choose_head,
    fixed_candidates,
    most_accurate,
    score,
    score_rows,
)
from sdk.prototypes import (
    DEFAULT_TEMPERATURE,
    CosineHead,
    leave_one_out_prototype_similarities,
    prototype_rows,
)
from sdk.text.encoder import primary_name
from trainer.rundir import STAGE3_BANK_PREFIX, RunDir


def proto_hits(support: np.ndarray, support_labels: np.ndarray, query: np.ndarray, query_labels: np.ndarray,
               k: int) -> np.ndarray:
    """[N] whether the cosine prototype head of the support classifies each query image right."""
    head = CosineHead(prototype_rows(support, support_labels, k, DEFAULT_TEMPERATURE))
    return head.logits(query).argmax(1) == query_labels


def proto_accuracy(support: np.ndarray, support_labels: np.ndarray, query: np.ndarray, query_labels: np.ndarray,
                   k: int) -> float:
    return 100.0 * float(np.mean(proto_hits(support, support_labels, query, query_labels, k)))


def crossval_oracle(hits: dict[str, np.ndarray], query_labels: np.ndarray) -> float:
    """The oracle pick without its selection bias (`trainer.headroom.crossval_correct`): the candidate
    best on one half of each class's query images is scored on the other half, both ways. With ~22
    candidates a point apart and 1000 query images, the plain maximum also picks the query set's noise."""
    from trainer.headroom import alternate_halves, crossval_correct

    stacked = np.stack(list(hits.values()))
    return 100.0 * crossval_correct(stacked, alternate_halves(query_labels)) / len(query_labels)


def interval(values: list[float]) -> dict:
    v = np.asarray(values, np.float64)
    half = 1.96 * v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0
    return {"mean": round(float(v.mean()), 2), "ci95": round(float(half), 2), "n": len(v)}


class Features:
    """Features of uint8 images under each candidate mixture (SDK engine) and under stage 1 (torch)."""

    def __init__(self, bundle: sdk.TaperBundle, stage1, preprocessing):
        self.bundle, self.stage1, self.preprocessing = bundle, stage1, preprocessing

    def of_alpha(self, alpha: np.ndarray, images: np.ndarray) -> np.ndarray:
        return candidate_features(self.bundle, alpha, images)[1]

    def of_stage1(self, images: np.ndarray, logits: bool = False) -> np.ndarray:
        return stage1_features(self.stage1, self.preprocessing, images, logits)


def stage1_features(stage1, preprocessing, images: np.ndarray, logits: bool = False) -> np.ndarray:
    """Penultimate features (or logits) of the trainer's ResNet18 `stage1` for uint8 images [N, S, S, 3]."""
    import torch

    out = []
    with torch.no_grad():
        for i in range(0, len(images), 500):
            f = stage1.features(torch.from_numpy(preprocessing.normalize(images[i:i + 500])))
            out.append((stage1.fc(f) if logits else f).numpy())
    return np.concatenate(out)


class MixtureFitter:
    """An experiment beyond selection: fit one task's mixture alpha [4, Q] to its support images by
    gradient descent on the leave-one-out prototype log-likelihood (the continuous proxy of
    `proxy_picks`), starting from the mixer's candidate. The bases are the run's stage-3 bank (the
    bundle's bases before export); the fitted alpha is then fused by the SDK like any candidate.
    Settings fixed before it was scored: Adam on log alpha, `steps` steps at `lr`, batch norm with the
    mixed running statistics (as the SDK folds them)."""

    def __init__(self, run: Path, model_config, num_bases: int, preprocessing, steps: int = 25, lr: float = 0.05):
        from trainer.basis_bank import BasisBank
        from trainer.checkpoints import load_state

        self.bank = BasisBank(model_config, num_bases)
        state = load_state(RunDir(run).stage3_model())
        self.bank.load_state_dict({k.removeprefix(STAGE3_BANK_PREFIX): v for k, v in state.items()
                                   if k.startswith(STAGE3_BANK_PREFIX)})
        self.bank.requires_grad_(False)
        self.config, self.preprocessing, self.steps, self.lr = model_config, preprocessing, steps, lr
        self.seconds: list[float] = []  # per fit

    def fit(self, alpha: np.ndarray, images: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """alpha [4, Q] (rows sum to 1) fitted to the support images [N, S, S, 3] with class labels [N]."""
        import torch

        from trainer.grouped_forward import GroupedForward

        start = time.perf_counter()
        x = torch.from_numpy(self.preprocessing.normalize(images))[None]
        y = torch.from_numpy(labels.astype(np.int64))
        log_alpha = torch.log(torch.as_tensor(alpha, dtype=torch.float32).clamp_min(1e-4)).requires_grad_()
        optimizer = torch.optim.Adam([log_alpha], lr=self.lr)
        for _ in range(self.steps):
            mixed = self.bank.mix(log_alpha.softmax(-1)[None])
            features = GroupedForward(mixed, 1, False).features(self.config, x)[:, 0]
            loss = -loo_prototype_log_likelihood(features, y, int(labels.max()) + 1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        self.seconds.append(time.perf_counter() - start)
        return log_alpha.detach().softmax(-1).numpy().astype(np.float32)


def loo_prototype_log_likelihood(features, labels, k: int):
    """torch: [N] log-probability of each example's class under the cosine prototype head (temperature
    DEFAULT_TEMPERATURE) with its own class's prototype made without it
    (`sdk.prototypes.leave_one_out_prototype_similarities`)."""
    import torch

    unit = torch.nn.functional.normalize(features, dim=1)
    sums = torch.zeros(k, unit.shape[1], dtype=unit.dtype).index_add(0, labels, unit)
    own = sums[labels] - unit  # the own class's sum without the example
    sims = unit @ torch.nn.functional.normalize(sums, dim=1).T
    own_sim = (unit * torch.nn.functional.normalize(own, dim=1)).sum(1)
    sims = sims.scatter(1, labels[:, None], own_sim[:, None])
    return torch.log_softmax(sims * DEFAULT_TEMPERATURE, 1).gather(1, labels[:, None])[:, 0]


def rank_correlation(a: list[float], b: list[float]) -> float:
    """Spearman's rho (ties get their average rank); nan when either side is constant."""
    ra, rb = average_ranks(np.asarray(a, np.float64)), average_ranks(np.asarray(b, np.float64))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def average_ranks(values: np.ndarray) -> np.ndarray:
    unique, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]


def proxy_picks(support: dict[str, np.ndarray], labels: np.ndarray, order: list[str]
                ) -> tuple[dict[str, str], list[float]]:
    """What each proxy picks from the candidates' support features (for the proxy comparison), and the SDK
    proxy's leave-one-out 1-NN accuracy of each candidate in `order` (for its rank correlation):
    - sdk: the SDK's rule (`sdk.fewshot.best`: the mixer's candidate unless another gets significantly
      more examples right by leave-one-out 1-NN; what proxy_selected reports);
    - most_accurate_1nn: the plain maximum of leave-one-out 1-NN accuracy (ties by margin), the rule
      before the guard;
    - loo_prototype: leave-one-out nearest-prototype accuracy (the head the SDK builds), ties by nll;
    - loo_prototype_nll: mean log-probability of the true class under that leave-one-out cosine head
      (temperature DEFAULT_TEMPERATURE): a continuous score, not steps of 1/N."""
    k = int(labels.max()) + 1
    scored = [score(Candidate(n, None), support[n], labels) for n in order]
    out = {"sdk": order[best(scored)], "most_accurate_1nn": order[most_accurate(scored)]}
    soft, hard = {}, {}
    for name in order:
        logits = leave_one_out_prototype_similarities(support[name], labels, k) * DEFAULT_TEMPERATURE
        top = logits.max(1, keepdims=True)
        log_p = logits - top - np.log(np.exp(logits - top).sum(1, keepdims=True))
        soft[name] = float(log_p[np.arange(len(labels)), labels].mean())
        hard[name] = float(np.mean(logits.argmax(1) == labels))
    out["loo_prototype"] = max(order, key=lambda n: (hard[n], soft[n], -order.index(n)))
    out["loo_prototype_nll"] = max(order, key=lambda n: (soft[n], -order.index(n)))
    return out, [c.accuracy for c in scored]


def unseen_task_sets(hierarchy, held: list[str], k: int, tasks: int, seed: int) -> list[np.ndarray]:
    """The classes (positions in `held`) of each unseen task. With k or fewer held-out classes every task
    holds them all (the issue's protocol); with more, task t is held-out class t mod n and its k - 1
    nearest held-out classes in the hierarchy (ties at random): a neighbourhood, as the seen tasks are."""
    if len(held) <= k:
        return [np.arange(len(held))] * tasks
    among = hierarchy.subset(held)
    rng = np.random.default_rng(seed + 7)
    return [np.sort(np.append(among.nearest(t % len(held), k - 1, rng), t % len(held))) for t in range(tasks)]


def unseen_tasks(features: Features, bundle, data, held: list[str], k: int, tasks: int, shots_list: list[int],
                 seed: int, fitter: MixtureFitter | None = None) -> tuple[dict, dict, dict]:
    """Per shot count, the rows' accuracies over `tasks` tasks (unseen_task_sets); how often each
    candidate was picked; and the proxy comparison (the query accuracy of each proxy's pick, and how the
    SDK's proxy ranks the candidates against their query accuracy)."""
    class_ids = [data.wnids.index(w) for w in held]
    names = [primary_name(data.names[c]) for c in class_ids]
    train_rows = [np.flatnonzero(data.train.labels == c) for c in class_ids]
    val_rows = [np.flatnonzero(data.val.labels == c) for c in class_ids]
    train_images = np.asarray(data.train.images[np.concatenate(train_rows)])
    val_images = np.asarray(data.val.images[np.concatenate(val_rows)])
    train_at = np.cumsum([0] + [len(r) for r in train_rows])  # class j's rows in train_images: train_at[j]...
    val_at = np.cumsum([0] + [len(r) for r in val_rows])
    sets = unseen_task_sets(data.hierarchy, held, k, tasks, seed)
    pool = fixed_candidates(bundle.num_bases)
    static: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for c in pool:
        t = time.perf_counter()
        static[c.name] = (features.of_alpha(c.alpha, train_images), features.of_alpha(c.alpha, val_images))
        print(f"[unseen] features of {c.name}: {time.perf_counter() - t:.1f} s", flush=True)
    static["stage1"] = (features.of_stage1(train_images), features.of_stage1(val_images))
    mixers: dict[tuple, tuple[str, tuple[np.ndarray, np.ndarray]]] = {}  # one per distinct class set
    rng = np.random.default_rng(seed)
    results, picks, comparison = {}, {}, {}
    for shots in shots_list:
        rows: dict[str, list[float]] = {}
        by_proxy: dict[str, list[float]] = {}
        correlations: list[float] = []
        for task in sets:
            t_train = np.concatenate([np.arange(train_at[j], train_at[j + 1]) for j in task])
            t_val = np.concatenate([np.arange(val_at[j], val_at[j + 1]) for j in task])
            val_labels = np.repeat(np.arange(len(task)), [val_at[j + 1] - val_at[j] for j in task])
            if tuple(task) not in mixers:
                mixer = candidates(bundle, [names[j] for j in task], None)[0]
                mixers[tuple(task)] = (mixer.name, (features.of_alpha(mixer.alpha, train_images[t_train]),
                                                    features.of_alpha(mixer.alpha, val_images[t_val])), mixer.alpha)
            mixer_name, mixer_feats, mixer_alpha = mixers[tuple(task)]
            feats = {mixer_name: mixer_feats, **{n: (f[0][t_train], f[1][t_val]) for n, f in static.items()}}
            order = [mixer_name, *(c.name for c in pool)]
            local_at = np.cumsum([0] + [train_at[j + 1] - train_at[j] for j in task])
            pick = np.concatenate([local_at[i] + rng.choice(local_at[i + 1] - local_at[i], shots, replace=False)
                                   for i in range(len(task))])
            labels = np.repeat(np.arange(len(task)), shots)
            hits = {n: proto_hits(f[0][pick], labels, f[1], val_labels, len(task)) for n, f in feats.items()}
            acc = {n: 100.0 * float(h.mean()) for n, h in hits.items()}
            rows.setdefault("stage1_proto", []).append(acc["stage1"])
            rows.setdefault("uniform_proto", []).append(acc["uniform"])
            rows.setdefault("mixer_names_proto", []).append(acc[mixer_name])
            rows.setdefault("oracle_selected", []).append(max(acc[n] for n in order))
            rows.setdefault("oracle_crossval", []).append(crossval_oracle({n: hits[n] for n in order}, val_labels))
            if shots >= 2 and fitter is not None:
                support_images = train_images[t_train[pick]]
                alpha = fitter.fit(mixer_alpha, support_images, labels)
                fitted = features.of_alpha(alpha, np.concatenate([support_images, val_images[t_val]]))
                rows.setdefault("fitted_mixture", []).append(
                    proto_accuracy(fitted[:len(pick)], labels, fitted[len(pick):], val_labels, len(task)))
            if shots >= 2:
                support = {n: feats[n][0][pick] for n in order}
                proxies, loo_1nn = proxy_picks(support, labels, order)
                chosen = proxies["sdk"]
                rows.setdefault("proxy_selected", []).append(acc[chosen])
                by_proxy.setdefault("random_candidate", []).append(float(np.mean([acc[n] for n in order])))
                for proxy, name in proxies.items():
                    by_proxy.setdefault(proxy, []).append(acc[name])
                correlations.append(rank_correlation(loo_1nn, [acc[n] for n in order]))
                picks.setdefault(f"{shots}shot", {}).setdefault(chosen, 0)
                picks[f"{shots}shot"][chosen] += 1
        results[f"unseen_{shots}shot"] = {k: interval(v) for k, v in rows.items()}
        if by_proxy:
            comparison[f"{shots}shot"] = {"picked_accuracy": {k: interval(v) for k, v in by_proxy.items()},
                                          "loo_1nn_spearman_mean": round(float(np.nanmean(correlations)), 3)}
        print(f"[unseen] {shots}-shot: " + ", ".join(f"{k} {v['mean']:.2f}" for k, v in results[f"unseen_{shots}shot"]
                                                    .items()), flush=True)
    return results, picks, comparison


def seen_tasks(features: Features, bundle, data, config, tasks: int, shots: int,
               seed: int) -> tuple[dict, dict, dict]:
    """5-shot tasks of trained classes: proxy-selected prototype head vs classifier selection; and the
    proxy comparison on these tasks (other classes than the unseen ones: a second sample)."""
    from trainer.data.tasks import TaskSampler

    sampler = TaskSampler(data.hierarchy, k=config.task_k, mode=config.task_mode)
    all_tasks = sampler.evaluation_tasks(seed)
    chosen_tasks = [all_tasks[i] for i in np.linspace(0, len(all_tasks) - 1, tasks).round().astype(int)]
    rng = np.random.default_rng(seed + 1)
    support_rows = {c: rng.choice(np.flatnonzero(data.train.labels == c), shots, replace=False)
                    for c in range(data.num_classes)}
    support_all = np.concatenate([support_rows[c] for c in range(data.num_classes)])
    support_images = np.asarray(data.train.images[support_all])  # class c's shots at rows c*shots...
    val_images, val_labels = np.asarray(data.val.images), data.val.labels
    pool = fixed_candidates(bundle.num_bases)
    static = {c.name: (features.of_alpha(c.alpha, support_images), features.of_alpha(c.alpha, val_images))
              for c in pool}
    stage1_logits = features.of_stage1(val_images, logits=True)
    rows: dict[str, list[float]] = {}
    by_proxy: dict[str, list[float]] = {}
    picks: dict[str, int] = {}
    for t, task in enumerate(chosen_tasks):
        names = [bundle.classes[c] for c in task]
        query = np.flatnonzero(np.isin(val_labels, task))
        q_labels = np.searchsorted(task, val_labels[query])
        s_index = np.concatenate([np.arange(c * shots, (c + 1) * shots) for c in task])
        s_labels = np.repeat(np.arange(len(task)), shots)
        mixer = candidates(bundle, names, None)[0]
        alphas = {mixer.name: mixer.alpha, **{c.name: c.alpha for c in pool}}
        both = features.of_alpha(mixer.alpha, np.concatenate([support_images[s_index], val_images[query]]))
        s_mixer, q_mixer = both[:len(s_index)], both[len(s_index):]  # one fusion for support and query
        feats = {mixer.name: (s_mixer, q_mixer), **{n: (f[0][s_index], f[1][query]) for n, f in static.items()}}
        order = [mixer.name, *(c.name for c in pool)]
        proxies, _ = proxy_picks({n: feats[n][0] for n in order}, s_labels, order)
        chosen = proxies["sdk"]
        picks[chosen] = picks.get(chosen, 0) + 1
        acc = {n: proto_accuracy(feats[n][0], s_labels, feats[n][1], q_labels, len(task)) for n in order}
        rows.setdefault("proxy_selected", []).append(acc[chosen])
        # What enrollment returns for these names (all the bundle's, `sdk.fewshot.enroll`): the head is
        # decided on the mixer's candidate; with the trained rows, the candidates are scored by their own
        # rows on the support (same guard), else the 1-NN proxy's pick keeps the prototypes.
        head = choose_head(bundle, mixer.alpha, s_mixer, s_labels, np.asarray(task))
        if head.trained:
            by_rows = [score_rows(bundle, Candidate(n, alphas[n]), feats[n][0], s_labels, np.asarray(task))
                       for n in order]
            enrolled_pick = order[best(by_rows)]
            rows.setdefault("sdk_enroll", []).append(
                100.0 * score_rows(bundle, Candidate(enrolled_pick, alphas[enrolled_pick]), feats[enrolled_pick][1],
                                   q_labels, np.asarray(task)).accuracy)
            picks[f"rows: {enrolled_pick}"] = picks.get(f"rows: {enrolled_pick}", 0) + 1
        else:
            rows.setdefault("sdk_enroll", []).append(acc[chosen])
            picks["prototypes kept"] = picks.get("prototypes kept", 0) + 1
        by_proxy.setdefault("random_candidate", []).append(float(np.mean(list(acc.values()))))
        for proxy, name in proxies.items():
            by_proxy.setdefault(proxy, []).append(acc[name])
        by_proxy.setdefault("oracle_selected", []).append(max(acc.values()))
        rows.setdefault("classifier_selection", []).append(
            100.0 * float(np.mean(stage1_logits[query][:, task].argmax(1) == q_labels)))
        rows.setdefault("taper_classifier", []).append(
            100.0 * score_rows(bundle, mixer, q_mixer, q_labels, np.asarray(task)).accuracy)
        if t % 20 == 0:
            print(f"[seen] task {t}: " + ", ".join(f"{k} {np.mean(v):.2f}" for k, v in rows.items()), flush=True)
    return {k: interval(v) for k, v in rows.items()}, picks, {k: interval(v) for k, v in by_proxy.items()}


def selection_time(bundle: sdk.TaperBundle, images: np.ndarray, labels: np.ndarray, names: list[str],
                   repeats: int) -> dict:
    """Median `sdk.personalize(bundle, examples=...)` time and its parts (after one untimed call)."""
    examples = {n: images[labels == k] for k, n in enumerate(names)}
    sdk.personalize(bundle, examples=examples)
    runs = [sdk.personalize(bundle, examples=examples).timings for _ in range(repeats)]
    return {k: round(statistics.median(r[k] for r in runs), 1) for k in runs[0] if all(k in r for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a run trained with holdout_classes")
    parser.add_argument("--bundle", type=Path, help="its bundle (default: exported into a temporary folder)")
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--seen-tasks", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5, help="timed selections (median)")
    parser.add_argument("--full-width", action="store_true",
                        help="also time selection on a full-width ResNet-18 at 224 px (random weights)")
    parser.add_argument("--fit-mixture", action="store_true",
                        help="experiment: also fit each 5-shot task's mixture to its support (MixtureFitter)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/fewshot"))
    args = parser.parse_args()

    from trainer.config import TrainConfig
    from trainer.data.holdout import held_out_classes, without_classes
    from trainer.run import load_model, network_config, open_all_data

    config = TrainConfig.load(RunDir(args.run).config)
    if not config.holdout_classes:
        raise SystemExit(f"{args.run} was trained on every class (holdout_classes=0): no unseen classes to test")
    all_data = open_all_data(config, progress=False)
    held = held_out_classes(all_data.hierarchy, config.holdout_classes)
    seen = without_classes(all_data, held)  # what the run trained on (trainer.run.open_data)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.bundle
        if path is None:
            from export.bundle import bundle_run

            path = bundle_run(args.run, Path(tmp) / "holdout.taper")
        bundle = sdk.load(path).warm_up()
        if len(bundle.classes) != seen.num_classes:
            raise SystemExit(f"the bundle has {len(bundle.classes)} classes, the run trained {seen.num_classes}")
        stage1 = load_model(network_config(config, seen.num_classes), RunDir(args.run).model("stage1"))
        features = Features(bundle, stage1, bundle.preprocessing)
        start = time.perf_counter()
        fitter = None
        if args.fit_mixture:
            fitter = MixtureFitter(args.run, network_config(config, seen.num_classes), bundle.num_bases,
                                   bundle.preprocessing)
        unseen, unseen_picks, proxies = unseen_tasks(features, bundle, all_data, held, config.task_k, args.tasks,
                                                     [5, 1], args.seed, fitter)
        seen_rows, seen_picks, seen_proxies = seen_tasks(features, bundle, seen, config, args.seen_tasks, 5, args.seed)
        class_ids = [all_data.wnids.index(w) for w in held][:config.task_k]  # 5 shots x 20 classes
        rng = np.random.default_rng(args.seed)
        rows = np.concatenate([rng.choice(np.flatnonzero(all_data.train.labels == c), 5, replace=False)
                               for c in class_ids])
        names = [primary_name(all_data.names[c]) for c in class_ids]
        timing = selection_time(bundle, np.asarray(all_data.train.images[rows]), np.repeat(np.arange(len(names)), 5),
                                names, args.repeats)
        # The same under 20 of the bundle's own class names: the trained rows win and cost one more fusion.
        from trainer.data.tasks import TaskSampler

        known = TaskSampler(seen.hierarchy, k=config.task_k).evaluation_tasks(args.seed)[0]
        known_rows = np.concatenate([rng.choice(np.flatnonzero(seen.train.labels == c), 5, replace=False)
                                     for c in known])
        known_timing = selection_time(bundle, np.asarray(seen.train.images[known_rows]),
                                      np.repeat(np.arange(len(known)), 5), [bundle.classes[c] for c in known],
                                      args.repeats)
        full = None
        if args.full_width:
            import bench_runtime

            big = sdk.load(bench_runtime.random_bundle(Path(tmp) / "full224.taper", "imagenet", 1.0, 1000, 224, 10))
            big.warm_up()
            images = np.random.default_rng(1).integers(0, 256, (100, 224, 224, 3), dtype=np.uint8)
            full = selection_time(big, images, np.repeat(np.arange(20), 5), [f"class {k}" for k in range(20)],
                                  max(1, args.repeats // 2))
        elapsed = time.perf_counter() - start
    result = {
        "unseen_5shot": {k: v["mean"] for k, v in unseen["unseen_5shot"].items()},
        "unseen_1shot": {k: v["mean"] for k, v in unseen["unseen_1shot"].items()},
        "seen_5shot": {k: v["mean"] for k, v in seen_rows.items()},
        "tasks": args.tasks, "seen_tasks": args.seen_tasks,
        "selection_ms": timing["total"],
        "fitted_mixture_fit_ms": round(1000 * statistics.median(fitter.seconds), 1) if fitter else None,
        "full_width_selection_ms": full["total"] if full else None,
        "intervals": {**unseen, "seen_5shot": seen_rows},
        "picks": {"unseen": unseen_picks, "seen_5shot": seen_picks},
        "proxy_comparison": {**proxies, "seen_5shot": {"picked_accuracy": seen_proxies}},
        "selection_timings_ms": {"bench": timing, "bench_known_names": known_timing,
                                 "full_width_224px_random_weights": full},
        "unseen_way": min(len(held), config.task_k),
        "unseen_tasks_are": "all held-out classes" if len(held) <= config.task_k else
                            "a held-out class and its nearest held-out classes in the hierarchy",
        "held_out_classes": [{"wnid": w, "name": all_data.names[all_data.wnids.index(w)]} for w in held],
        "run": str(args.run), "run_config": config.to_dict(), "seed": args.seed, "out": str(args.out),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}", "seconds": round(elapsed, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(report(result))
    print(report(result))


PROXY_LABELS = {"sdk": "the SDK's rule: the mixer's candidate unless the 1-NN proxy finds one significantly better "
                       "(= proxy_selected)",
                "most_accurate_1nn": "the highest leave-one-out 1-NN accuracy (the rule before the guard)",
                "loo_prototype": "leave-one-out nearest-prototype accuracy",
                "loo_prototype_nll": "leave-one-out prototype log-likelihood (continuous)",
                "random_candidate": "a candidate at random (mean over candidates)",
                "oracle_selected": "the best candidate on the query set (the ceiling)"}


def proxy_section(comparison: dict | None, tasks: str = "5-shot, unseen classes") -> list[str]:
    """A proxy comparison table, if the run measured it."""
    if not comparison:
        return []
    lines = [f"### Which proxy picks better ({tasks}; the same tasks and candidates)", "",
             "| proxy | query accuracy of its pick |", "|---|---|"]
    for name, v in comparison["picked_accuracy"].items():
        lines.append(f"| {PROXY_LABELS.get(name, name)} | {v['mean']:.2f} ± {v['ci95']:.2f} |")
    if "loo_1nn_spearman_mean" in comparison:
        lines += ["", f"Spearman correlation, within a task, between the 1-NN proxy and the query accuracy of "
                      f"the candidates (mean over tasks): {comparison['loo_1nn_spearman_mean']:.3f}."]
    lines.append("")
    return lines


def fitted_note(r: dict) -> list[str]:
    if not r.get("fitted_mixture_fit_ms"):
        return []
    return [f"fitted_mixture: the mixer's alpha fitted to the support by gradient descent on the leave-one-out "
            f"prototype log-likelihood (MixtureFitter, torch; {r['fitted_mixture_fit_ms']} ms per task, median)."]


def report(r: dict) -> str:
    iv = r["intervals"]

    def cell(table: str, row: str) -> str:
        v = iv.get(table, {}).get(row)
        return f"{v['mean']:.2f} ± {v['ci95']:.2f}" if v else "n/a"

    rows5 = ["stage1_proto", "uniform_proto", "mixer_names_proto", "proxy_selected", "oracle_selected"]
    rows5 += [row for row in ("oracle_crossval", "fitted_mixture") if row in iv["unseen_5shot"]]
    lines = ["# Few-shot enrollment benchmark", "",
             f"Command: `python -m scripts.bench_fewshot --run {r['run']} --tasks {r['tasks']}"
             f" --seen-tasks {r['seen_tasks']}{' --full-width' if r['full_width_selection_ms'] else ''}"
             f"{' --fit-mixture' if r.get('fitted_mixture_fit_ms') else ''} --out {r.get('out', '...')}`", "",
             f"Run: {r['run']} (holdout_classes={r['run_config']['holdout_classes']}, stage1/2/3 epochs "
             f"{r['run_config']['stage1_epochs']}/{r['run_config']['stage2_epochs']}/"
             f"{r['run_config']['stage3_epochs']}, width {r['run_config']['width']}).", "",
             f"## Unseen classes: {r.get('unseen_way', len(r['held_out_classes']))}-way, {r['tasks']} tasks "
             "(mean ± 95% interval over tasks, top-1 % on all their val images)", "",
             f"Each task: {r.get('unseen_tasks_are', 'all held-out classes')}.", "",
             "| row | 5-shot | 1-shot |", "|---|---|---|"]
    lines += [f"| {row} | {cell('unseen_5shot', row)} | {cell('unseen_1shot', row)} |" for row in rows5]
    u = r["unseen_5shot"]
    gap = u["oracle_selected"] - u["stage1_proto"]
    # With the oracle at or below stage1_proto there is no way to go a share of: say so, not "nan".
    share = (f"{(u['proxy_selected'] - u['stage1_proto']) / gap:.2f}" if gap > 0
             else f"undefined, the oracle is not above stage1_proto ({gap:+.2f})")
    lines += ["", f"proxy_selected - stage1_proto: {u['proxy_selected'] - u['stage1_proto']:+.2f} points "
              f"(target >= +2); share of the way from stage1_proto to the oracle: {share} (target >= 0.5).",
              "1-shot has no proxy row: leave-one-out needs two images per class (the SDK refuses one).",
              "oracle_crossval: the oracle without its selection bias (picked on half of each class's query "
              "images, scored on the other half, both ways).", *fitted_note(r), "",
              f"Candidates picked by the proxy (5-shot): {r['picks']['unseen'].get('5shot', {})}", ""]
    lines += proxy_section(r.get("proxy_comparison", {}).get("5shot"))
    lines += [f"## Seen classes: {r['run_config']['task_k']}-way, 5-shot, {r['seen_tasks']} tasks", "",
              "| row | accuracy |", "|---|---|"]
    lines += [f"| {row} | {cell('seen_5shot', row)} |" for row in r["seen_5shot"]]
    lines += ["", "proxy_selected: the 1-NN proxy's candidate with the prototype head. sdk_enroll: what "
              "`sdk.personalize(bundle, examples=...)` returns for these names, which are all the bundle's: the head "
              "is decided on the mixer's candidate (its trained rows if they get at least as much of the support "
              "right as the prototypes do leaving each image out, `sdk.fewshot.choose_head`); with the trained "
              "rows, the candidate is then picked by what its own rows get right on the support (the same guard). "
              "classifier_selection: the stage-1 network's trained rows; taper_classifier: the mixer's network "
              "from the names with its trained rows.", "",
              f"Candidates picked by the 1-NN proxy, and by enrollment (`rows: ...`, or the tasks where the "
              f"prototypes were kept): {r['picks']['seen_5shot']}", ""]
    lines += proxy_section(r.get("proxy_comparison", {}).get("seen_5shot"), "5-shot, seen classes")
    lines += ["## Selection time (`sdk.personalize(bundle, examples=...)`, 5 shots x "
              f"{r.get('unseen_way', len(r['held_out_classes']))} classes, median ms)", ""]
    for name, t in r["selection_timings_ms"].items():
        if t:
            lines.append(f"- {name}: " + ", ".join(f"{k} {v}" for k, v in t.items()))
    lines += ["", "## Held-out classes", "", ", ".join(f"{c['name']} ({c['wnid']})" for c in r["held_out_classes"]),
              "", f"Machine: {r['machine']}; benchmark wall time {r['seconds']} s."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
