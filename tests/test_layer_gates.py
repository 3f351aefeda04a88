"""TAPS gates (trainer.layer_gates): closed layers are W_0, the scores get the straight-through gradient,
the penalty ramps in, baking makes a plain bank, and a gated stage 3 exports its closed layers as shared."""

import json

import numpy as np
import pytest
import torch

from sdk.architecture import NUM_BLOCKS, mixed_layers
from trainer.basis_bank import BasisBank
from trainer.layer_gates import LayerGates
from trainer.models import ResNet18, ResNetConfig

CONFIG = ResNetConfig(num_classes=6, stem="small", width=0.25)


def _bank_and_base(seed=0):
    torch.manual_seed(seed)
    base = ResNet18(CONFIG).state_dict()
    for name, t in base.items():   # non-trivial running statistics, so that gating them shows
        if name.endswith("running_var"):
            t.uniform_(0.5, 2.0)
        elif name.endswith("running_mean"):
            t.normal_()
    bases = []
    for _ in range(3):
        state = {n: t.clone() for n, t in base.items()}
        for t in state.values():
            if t.is_floating_point():
                t.add_(0.1 * torch.randn_like(t))
        bases.append(state)
    return BasisBank.from_state_dicts(CONFIG, bases), base


def _close(gates, basis, layer_name):
    with torch.no_grad():
        gates.scores[basis, [layer.name for layer in gates.layers].index(layer_name)] = -0.5


def test_a_closed_gate_puts_that_basis_layer_back_to_w0_and_nothing_else():
    bank, base = _bank_and_base()
    gates = LayerGates(bank, base, penalty=1.0)
    _close(gates, 1, "layer2.0.conv1")
    one_hot = torch.zeros(1, NUM_BLOCKS, 3)
    one_hot[0, :, 1] = 1
    gated = bank.mix(one_hot, gates=gates)
    plain = bank.mix(one_hot)
    layer = next(lay for lay in gates.layers if lay.name == "layer2.0.conv1")
    for name in plain:
        if name in (layer.weight, *layer.channels):
            assert torch.equal(gated[name][0], base[name].float()), name      # W_0, statistics too
        else:
            torch.testing.assert_close(gated[name], plain[name], rtol=0, atol=1e-6)   # open: the basis


def test_the_score_gets_the_straight_through_gradient():
    """d loss / d s_ql = <d loss / d W_ql, D_ql> (TAPS's estimator), over the layer's conv and batch norm."""
    bank, base = _bank_and_base()
    gates = LayerGates(bank, base, penalty=0.0)
    alpha = torch.softmax(torch.randn(1, NUM_BLOCKS, 3), -1)
    weights = bank.mix(alpha, with_stats=False, gates=gates)
    target = {n: torch.randn_like(t) for n, t in weights.items()}
    loss = sum((w * target[n]).sum() for n, w in weights.items())
    loss.backward()
    i = [lay.name for lay in gates.layers].index("layer3.1.conv2")
    layer = gates.layers[i]
    block = layer.block
    for q in range(3):   # dL/dW_q = alpha_q * target (the mixed weights are linear in each basis's rows)
        delta = {n: bank.basis_state_dict(q)[n] - base[n] for n in (layer.weight, *layer.channels[:2])}
        expected = sum(float(alpha[0, block, q]) * (target[n][0] * d).sum() for n, d in delta.items())
        assert float(gates.scores.grad[q, i]) == pytest.approx(float(expected), rel=1e-4)


def test_the_penalty_ramps_in_over_the_warm_up_and_weighs_layers_by_size():
    bank, base = _bank_and_base()
    gates = LayerGates(bank, base, penalty=0.5, warmup=0.2)
    assert float(gates.weights.mean()) == pytest.approx(1.0)
    big = max(range(len(gates.layers)), key=lambda i: float(gates.weights[i]))
    assert gates.layers[big].name.startswith("layer4")
    assert gates.penalty(0.0).item() == 0.0
    full = 0.5 * 3 * float(gates.weights.mean())    # scores all 1
    assert gates.penalty(0.1).item() == pytest.approx(full / 2)
    assert gates.penalty(0.7).item() == pytest.approx(full)


def test_baking_writes_w0_into_closed_layers_exactly_and_leaves_open_ones_bit_for_bit():
    bank, base = _bank_and_base()
    before = {b: (bank.params(b).detach().clone(), bank.stats(b).clone()) for b in range(NUM_BLOCKS)}
    gates = LayerGates(bank, base, penalty=1.0)
    for q in range(3):
        _close(gates, q, "layer1.1.conv1")
    _close(gates, 0, "fc")
    gates.bake(bank)
    assert gates.summary()["layers_closed_for_every_basis"] == ["layer1.1.conv1"]
    states = [bank.basis_state_dict(q) for q in range(3)]
    for q, state in enumerate(states):
        for name in ("layer1.1.conv1.weight", "layer1.1.bn1.running_var") + (("fc.weight",) if q == 0 else ()):
            assert torch.equal(state[name], base[name]), (q, name)
    for b in range(1, NUM_BLOCKS - 1):   # blocks 1-2 had no closed layer
        assert torch.equal(bank.params(b), before[b][0]) and torch.equal(bank.stats(b), before[b][1])


def test_a_gated_stage3_closes_layers_and_the_bundle_stores_them_shared(tiny_run, tmp_path):
    """A penalty strong enough to close layers: gates.json says which, the saved bank has those layers
    identical in every basis, and a compact export stores them without deltas."""
    from export.compress import Mode, compress
    from sdk.bases import CompactBases
    from trainer.checkpoints import load_state
    from trainer.run import run

    out = run(tmp_path / "gated", "tiny", {"gate_penalty": 20.0, "gate_lr": 0.5, "gate_warmup": 0.0},
              progress=False, reuse_from=tiny_run)
    summary = json.loads((out / "stage3" / "gates.json").read_text())
    closed = summary["layers_closed_for_every_basis"]
    assert closed and summary["open_fraction"] < 1.0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert any("gate_penalty" in r for r in log if r.get("stage") == "stage3")
    state = load_state(out / "stage3" / "model.safetensors")
    assert not any(k.startswith("gates.") for k in state)              # a plain stage-3 model
    stage1 = load_state(out / "stage1" / "model.safetensors")
    rows = [np.concatenate([state[f"bank.params{b}"].numpy(), state[f"bank.stats{b}"].numpy()], 1) for b in range(4)]
    shapes = {n: tuple(t.shape) for n, t in stage1.items()}
    bases = CompactBases.full(rows, shapes)
    weights = {lb.layer.name: lb for lb in bases.layers}
    for name in closed:
        lb = weights[name]
        stacked = np.stack([lb.base() + lb.delta_of(q) for q in range(bases.num_bases)])
        assert np.array_equal(stacked, np.broadcast_to(stacked[:1], stacked.shape)), name
        assert np.array_equal(stacked[0], stage1[lb.layer.weight].numpy().reshape(stacked[0].shape)), name
    stored = compress(bases, Mode.parse("drop:0.001+subspace:2"))
    assert set(closed) <= {lb.layer.name for lb in stored.layers if lb.kind == "shared"}


def test_gated_stage2_bases_are_stage1_where_their_gates_closed(tiny_run, tmp_path):
    from trainer.checkpoints import load_state
    from trainer.run import run

    out = run(tmp_path / "gated2", "tiny", {"stage2_gate_penalty": 20.0, "stage2_gate_lr": 0.5,
                                            "stage2_gate_warmup": 0.0},
              progress=False, reuse_from=tiny_run, until="stage2")
    stage1 = load_state(out / "stage1" / "model.safetensors")
    some_closed = some_open = False
    for q in range(3):
        summary = json.loads((out / "stage2" / f"basis{q}" / "gates.json").read_text())
        basis = load_state(out / "stage2" / f"basis{q}.safetensors")
        assert set(basis) == set(stage1)                                  # a plain state dict again
        layers = mixed_layers({n: tuple(t.shape) for n, t in stage1.items()})
        for layer, is_open in zip(layers, summary["open"], strict=True):
            same = all(torch.equal(basis[n], stage1[n]) for n in (layer.weight, *layer.channels))
            assert same == (not is_open), (q, layer.name)                  # open layers moved in training
            some_closed |= not is_open
            some_open |= bool(is_open)
    assert some_closed and some_open
