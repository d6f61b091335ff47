"""The shared Trainer: learning, determinism, exact resume, checkpoints without pickle."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.errors import InputError
from holoxmc.train import (
    REFIT_DIR,
    TrainConfig,
    Trainer,
    evaluate_topk,
    lr_factor,
    predict_topk,
    split_validation,
)
from holoxmc.train.checkpoint import (
    CHECKPOINT_JSON, CHECKPOINT_TENSORS, flatten_optimizer_state, unflatten_optimizer_state,
)
from holoxmc.train.optim import (
    AUTO_MIN_ROWS, CatchUpAdam, build_optimizers, choose_sparse_updates, clip_grad_norm_, read_share,
    sparse_update_tables,
)


class TinyNetwork(nn.Module):
    """A minimal Network-like model (EmbeddingBag → ReLU → dropout → L logits, BCE loss)."""

    def __init__(self, n_features: int, n_labels: int, hidden: int = 16, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.embed = nn.EmbeddingBag(n_features, hidden, mode="sum")
        self.out = nn.Linear(hidden, n_labels)
        self.dropout = nn.Dropout(0.2)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)

    def forward(self, x: SparseBatch) -> torch.Tensor:
        h = self.embed(x.indices, x.offsets, per_sample_weights=x.values)
        return self.out(self.dropout(torch.relu(h)))

    def loss(self, x: SparseBatch, labels: LabelBatch) -> torch.Tensor:
        return nn.functional.binary_cross_entropy_with_logits(self(x), labels.to_dense())

    def topk(self, x: SparseBatch, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.topk(self(x), k, dim=1)


class InterruptAfter(TinyNetwork):
    """Raises KeyboardInterrupt at a given training step, like a killed process."""

    def __init__(self, *args, steps: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps_left = steps

    def loss(self, x, labels):
        if self.steps_left == 0:
            raise KeyboardInterrupt
        self.steps_left -= 1
        return super().loss(x, labels)


def make_data(n: int = 240, n_features: int = 40, n_labels: int = 6, seed: int = 0):
    """Label ``l`` is present when feature ``l`` is (at least one per row), plus noise features."""
    rng = np.random.default_rng(seed)
    rows = [
        np.concatenate([[rng.integers(n_labels)], n_labels + rng.choice(n_features - n_labels, 5, replace=False)])
        for _ in range(n)
    ]
    X = sp.csr_matrix(
        (np.ones(6 * n, np.float32), np.concatenate(rows), np.arange(0, 6 * n + 1, 6)), shape=(n, n_features)
    )
    X.sort_indices()
    Y = sp.csr_matrix(X[:, :n_labels].toarray().astype(np.float32))
    return X, Y


def weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


CONFIG = dict(epochs=4, batch_size=32, lr=0.05, seed=3, progress=False)


def test_lr_factor_warmup_then_cosine_to_zero():
    assert lr_factor("none", 7, 10) == 1.0
    assert [lr_factor("cosine", s, 10, warmup_steps=2) for s in (0, 1)] == [0.5, 1.0]
    assert lr_factor("cosine", 2, 10, warmup_steps=2) == 1.0
    assert lr_factor("cosine", 10, 10) == pytest.approx(0.0, abs=1e-12)
    assert lr_factor("linear", 5, 10) == pytest.approx(0.5)


def test_split_validation_is_seeded_disjoint_and_complete():
    train, val = split_validation(101, 0.1, seed=5)
    assert len(val) == 10 and len(train) == 91
    assert np.intersect1d(train, val).size == 0
    assert np.array_equal(np.sort(np.concatenate([train, val])), np.arange(101))
    again_train, again_val = split_validation(101, 0.1, seed=5)
    assert np.array_equal(val, again_val) and np.array_equal(train, again_train)
    assert not np.array_equal(val, split_validation(101, 0.1, seed=6)[1])
    assert len(split_validation(5, 0.01, seed=0)[1]) == 1  # never an empty validation set


def test_fit_learns_and_selects_on_validation():
    X, Y = make_data()
    network = TinyNetwork(X.shape[1], Y.shape[1])
    before = evaluate_topk(network, X, Y, ks=(1,))["P@1"]
    result = Trainer(TrainConfig(**CONFIG | {"epochs": 8})).fit(network, X, Y)
    assert len(result.history) == 8
    assert all("P@1" in h["val"] and h["seconds"] > 0 for h in result.history)
    best = max(h["val"]["P@1"] for h in result.history)
    assert result.best_score == best
    assert result.history[result.best_epoch - 1]["val"]["P@1"] == best
    after = evaluate_topk(network, X, Y, ks=(1,))["P@1"]
    assert after > before + 20 and after > 80


def test_same_seed_same_weights_and_global_rng_untouched():
    X, Y = make_data()
    first = TinyNetwork(X.shape[1], Y.shape[1])
    torch.manual_seed(1234)
    global_state = torch.get_rng_state()
    Trainer(TrainConfig(**CONFIG)).fit(first, X, Y)
    assert torch.equal(torch.get_rng_state(), global_state)
    second = TinyNetwork(X.shape[1], Y.shape[1])
    torch.manual_seed(999)  # a different global state must not matter
    Trainer(TrainConfig(**CONFIG)).fit(second, X, Y)
    assert_same_weights(weights(first), weights(second))
    third = TinyNetwork(X.shape[1], Y.shape[1])
    Trainer(TrainConfig(**CONFIG | {"seed": 4})).fit(third, X, Y)
    assert not torch.equal(weights(first)["out.weight"], weights(third)["out.weight"])


@pytest.mark.parametrize("sparse_updates, precision", [(False, "float32"), (True, "float32"), (False, "bfloat16")])
@pytest.mark.parametrize("kill_at_step", [14, 17])  # 7 steps/epoch: right after epoch 2, and mid-epoch 3
def test_killed_run_resumes_to_identical_weights_and_metrics(tmp_path, kill_at_step, sparse_updates, precision):
    X, Y = make_data()
    config = TrainConfig(**CONFIG, sparse_updates=sparse_updates, precision=precision)
    reference = TinyNetwork(X.shape[1], Y.shape[1])
    expected = Trainer(config).fit(reference, X, Y, run_dir=tmp_path / "uninterrupted")

    run_dir = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        Trainer(config).fit(InterruptAfter(X.shape[1], Y.shape[1], steps=kill_at_step), X, Y, run_dir=run_dir)
    saved = json.loads((run_dir / CHECKPOINT_JSON).read_text())
    assert saved["epoch"] == 2

    resumed_network = TinyNetwork(X.shape[1], Y.shape[1], seed=77)  # fresh, different init
    resumed = Trainer(config).fit(resumed_network, X, Y, run_dir=run_dir, resume=True)
    assert len(resumed.history) == len(expected.history)
    assert [h["val"] for h in resumed.history] == [h["val"] for h in expected.history]
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in expected.history]
    assert resumed.best_epoch == expected.best_epoch
    assert_same_weights(weights(resumed_network), weights(reference))
    assert evaluate_topk(resumed_network, X, Y) == evaluate_topk(reference, X, Y)


def test_checkpoint_is_safetensors_plus_json(tmp_path):
    X, Y = make_data()
    Trainer(TrainConfig(**CONFIG | {"epochs": 2})).fit(TinyNetwork(40, 6), X, Y, run_dir=tmp_path)
    state = json.loads((tmp_path / CHECKPOINT_JSON).read_text())
    assert state["epoch"] == 2 and len(state["history"]) == 2
    assert state["config"]["seed"] == 3 and state["rng"]["next_epoch"] == 2
    with safe_open(str(tmp_path / CHECKPOINT_TENSORS), framework="pt") as f:
        names = set(f.keys())
        assert json.loads(f.metadata()["trainer_state"])["epoch"] == 2
    assert {"model.out.weight", "best.out.weight"} <= names
    assert any(n.startswith("optim0.") and n.endswith("exp_avg_sq") for n in names)
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT_JSON, CHECKPOINT_TENSORS]


def test_resume_with_other_configuration_is_refused(tmp_path):
    X, Y = make_data()
    Trainer(TrainConfig(**CONFIG | {"epochs": 1})).fit(TinyNetwork(40, 6), X, Y, run_dir=tmp_path)
    with pytest.raises(InputError, match="another configuration"):
        Trainer(TrainConfig(**CONFIG | {"epochs": 1, "lr": 0.1})).fit(
            TinyNetwork(40, 6), X, Y, run_dir=tmp_path, resume=True
        )


def test_a_float32_checkpoint_is_recorded_as_before_precision_existed_and_resumes_only_as_float32(tmp_path):
    X, Y = make_data()
    Trainer(TrainConfig(**CONFIG | {"epochs": 1})).fit(TinyNetwork(40, 6), X, Y, run_dir=tmp_path / "full")
    saved = json.loads((tmp_path / "full" / CHECKPOINT_JSON).read_text())["config"]
    assert "precision" not in saved and "reuse_memory" not in saved  # so checkpoints written before still match
    with pytest.raises(InputError, match="another configuration"):
        Trainer(TrainConfig(**CONFIG | {"epochs": 1, "precision": "bfloat16"})).fit(
            TinyNetwork(40, 6), X, Y, run_dir=tmp_path / "full", resume=True
        )
    Trainer(TrainConfig(**CONFIG | {"epochs": 1, "precision": "bfloat16"})).fit(
        TinyNetwork(40, 6), X, Y, run_dir=tmp_path / "mixed"
    )
    assert json.loads((tmp_path / "mixed" / CHECKPOINT_JSON).read_text())["config"]["precision"] == "bfloat16"


def test_resume_on_other_data_of_the_same_shape_is_refused(tmp_path):
    X, Y = make_data()
    Trainer(TrainConfig(**CONFIG | {"epochs": 1})).fit(TinyNetwork(40, 6), X, Y, run_dir=tmp_path)
    with pytest.raises(InputError, match="another configuration or data"):
        Trainer(TrainConfig(**CONFIG | {"epochs": 1})).fit(TinyNetwork(40, 6), 2 * X, Y, run_dir=tmp_path, resume=True)
    Trainer(TrainConfig(**CONFIG | {"epochs": 1})).fit(TinyNetwork(40, 6), X, Y, run_dir=tmp_path, resume=True)


def test_early_stopping_and_explicit_validation_set():
    X, Y = make_data()
    config = TrainConfig(**CONFIG | {"epochs": 30, "patience": 2, "lr": 0.2})
    result = Trainer(config).fit(TinyNetwork(40, 6), X[:200], Y[:200], X[200:], Y[200:])
    assert result.stopped_early and len(result.history) < 30
    assert len(result.history) - result.best_epoch == 2


def test_a_time_limit_stops_after_the_epoch_that_crosses_it_and_keeps_the_best_epoch():
    X, Y = make_data()
    unlimited = Trainer(TrainConfig(**CONFIG)).fit(TinyNetwork(40, 6), X, Y)
    assert not unlimited.stopped_early and len(unlimited.history) == CONFIG["epochs"]
    result = Trainer(TrainConfig(**CONFIG | {"time_limit": 0.0})).fit(TinyNetwork(40, 6), X, Y)
    assert result.stopped_early and len(result.history) == 1 and result.best_epoch == 1
    # the same first epoch as the unlimited run: the limit only ends the run
    assert result.history[0]["loss"] == unlimited.history[0]["loss"]


def test_a_time_limit_does_not_cut_the_refit_phase():
    X, Y = make_data()
    result = Trainer(TrainConfig(**CONFIG | {"time_limit": 0.0, "refit": True})).fit(TinyNetwork(40, 6), X, Y)
    assert result.stopped_early and result.refit is not None
    assert len(result.refit.history) == result.best_epoch == 1 and not result.refit.stopped_early


@pytest.mark.parametrize("limit", [-1.0, math.inf, math.nan])
def test_a_bad_time_limit_is_one_error(limit):
    with pytest.raises(InputError, match="time_limit"):
        TrainConfig(time_limit=limit)


def test_runs_recorded_before_time_limit_existed_still_match():
    assert "time_limit" not in TrainConfig().record()
    assert TrainConfig(time_limit=5.0).record()["time_limit"] == 5.0


def test_inference_scores_every_row_with_odd_batch_sizes():
    X, Y = make_data(n=103)
    network = TinyNetwork(40, 6)
    indices, scores = predict_topk(network, X, k=3, batch_size=10)
    full_scores, full_indices = network.eval().topk(SparseBatch.from_csr(X), 3)
    assert np.array_equal(indices, full_indices.numpy())
    assert np.allclose(scores, full_scores.detach().numpy(), atol=1e-6)
    assert evaluate_topk(network, X, Y, batch_size=10) == evaluate_topk(network, X, Y, batch_size=1000)


@pytest.mark.parametrize("head", ["dense", "hrr"])
def test_predict_topk_pads_ranks_beyond_the_label_count(head):
    from holoxmc.backbones import build_network

    X, _ = make_data(n=23)
    network = build_network("fc", head, n_labels=6, n_features=40, hidden=[8], seed=0)
    indices, scores = predict_topk(network, X, k=9, batch_size=10)
    all_indices, all_scores = predict_topk(network, X, k=6, batch_size=10)
    assert np.array_equal(indices[:, :6], all_indices) and np.array_equal(scores[:, :6], all_scores)
    assert (indices[:, 6:] == -1).all() and np.isneginf(scores[:, 6:]).all()


@pytest.mark.parametrize(
    "bad, match",
    [({"epochs": 0}, "epochs"), ({"schedule": "exp"}, "schedule"), ({"val_fraction": 1.0}, "val_fraction"),
     ({"epochs": 4, "stop_epoch": 5}, "stop_epoch"), ({"stop_epoch": 0}, "stop_epoch"),
     ({"sparse_updates": True, "weight_decay": 1e-4}, "weight decay"), ({"sparse_updates": "yes"}, "sparse_updates"),
     ({"weight_decay": float("nan")}, "weight_decay"), ({"warmup_epochs": -1.0}, "warmup_epochs"),
     ({"grad_clip": 0.0}, "grad_clip"), ({"grad_clip": float("inf")}, "grad_clip"), ({"seed": -1}, "seed"),
     ({"seed": 1.5}, "seed"), ({"seed": True}, "seed"), ({"select_metric": "P@2"}, "select_metric"),
     ({"select_metric": "PSP@1"}, "select_metric"), ({"precision": "float16"}, "precision"),
     ({"precision": "bf16"}, "precision")],
)
def test_config_validation(bad, match):
    with pytest.raises(InputError, match=match):
        TrainConfig(**bad)


@pytest.mark.parametrize("head", ["dense", "hrr"])
def test_bfloat16_steps_run_the_layers_in_bfloat16_and_keep_float32_weights(head):
    from holoxmc.backbones import build_network

    X, Y = make_data()
    seen: dict[str, set[torch.dtype]] = {"backbone": set(), "head": set()}
    networks = {}
    for precision in ("float32", "bfloat16"):
        network = build_network("fc", head, n_features=40, n_labels=6, hidden=[32, 32], seed=0)
        record = {"backbone": network.backbone.layers[0], "head": network.head.linear if head == "hrr" else network.head}
        hooks = [module.register_forward_hook(lambda _m, _i, out, part=part: seen[part].add(out.dtype))
                 for part, module in record.items()] if precision == "bfloat16" else []
        Trainer(TrainConfig(**CONFIG | {"epochs": 8, "precision": precision})).fit(network, X, Y)
        for hook in hooks:
            hook.remove()
        networks[precision] = network
    assert seen["backbone"] >= {torch.bfloat16} and seen["head"] >= {torch.bfloat16}  # training steps
    assert torch.float32 in seen["backbone"]  # validation runs in float32
    mixed = networks["bfloat16"]
    assert all(p.dtype == torch.float32 for p in mixed.parameters())
    assert not torch.equal(mixed.backbone.layers[0].weight, networks["float32"].backbone.layers[0].weight)
    p_at_1 = {precision: evaluate_topk(net, X, Y, ks=(1,))["P@1"] for precision, net in networks.items()}
    assert p_at_1["bfloat16"] > 80 and abs(p_at_1["bfloat16"] - p_at_1["float32"]) < 10


def test_refit_refuses_validation_labels_of_another_label_space_before_training():
    X, Y = make_data()
    network = TinyNetwork(40, 6)
    before = {name: value.clone() for name, value in network.state_dict().items()}
    with pytest.raises(InputError, match="refit"):
        Trainer(TrainConfig(**CONFIG | {"refit": True})).fit(network, X[:50], Y[:50], X[50:], Y[50:, :4])
    assert all(torch.equal(value, before[name]) for name, value in network.state_dict().items())


def test_trained_hrr_network_decodes_like_a_fresh_copy_of_its_weights():
    """Caches inside a head (e.g. a folded decoder keyed on weight versions) must see the
    trainer's in-place (fused) optimizer updates."""
    from holoxmc.backbones import build_network

    X, Y = make_data()
    network = build_network("fc", "hrr", n_labels=6, n_features=40, hidden=[16], dim=32, seed=0)
    evaluate_topk(network, X, Y)  # decode once before training: fills any decoding cache
    Trainer(TrainConfig(**CONFIG | {"epochs": 2})).fit(network, X, Y)
    fresh = build_network(**network.config)
    fresh.load_state_dict(network.state_dict())
    assert evaluate_topk(network, X, Y) == evaluate_topk(fresh, X, Y)


def test_sampled_ranking_term_is_deterministic_and_resumes_exactly(tmp_path):
    """The HRR ranking term draws its labels from the torch RNG inside the step; the
    trainer's per-epoch seeding must make that reproducible and resumable."""
    from holoxmc.backbones import build_network

    X, Y = make_data()

    def network():
        return build_network("fc", "hrr", n_features=X.shape[1], n_labels=Y.shape[1], dim=32, hidden=[16],
                             ranking=1.0, ranking_candidates=3, seed=0)

    config = TrainConfig(**CONFIG)
    reference = network()
    expected = Trainer(config).fit(reference, X, Y, run_dir=tmp_path / "uninterrupted")
    again = network()
    Trainer(config).fit(again, X, Y)
    assert_same_weights(weights(again), weights(reference))

    killed, steps_left = network(), [17]  # 7 steps/epoch: mid-epoch 3

    def interrupting_loss(x, labels, loss=killed.loss):
        if steps_left[0] == 0:
            raise KeyboardInterrupt
        steps_left[0] -= 1
        return loss(x, labels)

    killed.loss = interrupting_loss
    with pytest.raises(KeyboardInterrupt):
        Trainer(config).fit(killed, X, Y, run_dir=tmp_path / "killed")
    resumed_network = network()
    resumed = Trainer(config).fit(resumed_network, X, Y, run_dir=tmp_path / "killed", resume=True)
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in expected.history]
    assert_same_weights(weights(resumed_network), weights(reference))
    other = network()
    Trainer(TrainConfig(**CONFIG | {"seed": 4})).fit(other, X, Y)
    assert not torch.equal(weights(other)["head.linear.weight"], weights(reference)["head.linear.weight"])


def test_refit_retrains_from_the_initial_weights_on_every_row_up_to_the_selected_epoch(tmp_path):
    X, Y = make_data()
    selected = TinyNetwork(X.shape[1], Y.shape[1])
    result = Trainer(TrainConfig(**CONFIG)).fit(selected, X, Y)

    refitted = TinyNetwork(X.shape[1], Y.shape[1])
    refit_result = Trainer(TrainConfig(**CONFIG | {"refit": True})).fit(refitted, X, Y)
    def without_time(history):
        return [{k: v for k, v in h.items() if k != "seconds"} for h in history]

    assert without_time(refit_result.history) == without_time(result.history)
    assert refit_result.best_epoch == result.best_epoch
    assert len(refit_result.refit.history) == result.best_epoch
    assert len(refit_result.epoch_seconds) == len(result.history) + result.best_epoch

    by_hand = TinyNetwork(X.shape[1], Y.shape[1])
    config = TrainConfig(**CONFIG | {"stop_epoch": result.best_epoch, "val_fraction": 0.0})
    Trainer(config).fit(by_hand, X, Y)  # all 240 rows, the same schedule, stopped at the selected epoch
    assert_same_weights(weights(refitted), weights(by_hand))
    assert not torch.equal(weights(refitted)["out.weight"], weights(selected)["out.weight"])

    # with an explicit validation set, the refit trains on both sets together
    given = TinyNetwork(X.shape[1], Y.shape[1])
    Trainer(TrainConfig(**CONFIG | {"refit": True})).fit(given, X[:200], Y[:200], X[200:], Y[200:])
    explicit = Trainer(TrainConfig(**CONFIG)).fit(TinyNetwork(X.shape[1], Y.shape[1]), X[:200], Y[:200], X[200:], Y[200:])
    by_hand = TinyNetwork(X.shape[1], Y.shape[1])
    Trainer(TrainConfig(**CONFIG | {"stop_epoch": explicit.best_epoch, "val_fraction": 0.0})).fit(by_hand, X, Y)
    assert_same_weights(weights(given), weights(by_hand))


# 28 selection steps (7 per epoch), then the refit's 3 epochs of 8: early in its first
# epoch, and in its second, after its first checkpoint
@pytest.mark.parametrize("kill_at_step", [30, 39])
def test_killed_refit_resumes_to_identical_weights(tmp_path, kill_at_step):
    X, Y = make_data()
    config = TrainConfig(**CONFIG | {"refit": True})
    reference = TinyNetwork(X.shape[1], Y.shape[1])
    assert Trainer(config).fit(reference, X, Y, run_dir=tmp_path / "uninterrupted").best_epoch == 3
    with pytest.raises(KeyboardInterrupt):
        Trainer(config).fit(InterruptAfter(X.shape[1], Y.shape[1], steps=kill_at_step), X, Y, run_dir=tmp_path / "killed")
    refit_saved = (tmp_path / "killed" / REFIT_DIR / CHECKPOINT_JSON).exists()
    assert refit_saved == (kill_at_step == 39)
    resumed = TinyNetwork(X.shape[1], Y.shape[1])  # freshly built: the same initial weights
    Trainer(config).fit(resumed, X, Y, run_dir=tmp_path / "killed", resume=True)
    assert_same_weights(weights(resumed), weights(reference))


def test_stop_epoch_runs_the_first_epochs_of_the_full_schedule():
    X, Y = make_data()
    full = Trainer(TrainConfig(**CONFIG | {"val_fraction": 0.0})).fit(TinyNetwork(X.shape[1], Y.shape[1]), X, Y)
    first_two = Trainer(TrainConfig(**CONFIG | {"val_fraction": 0.0, "stop_epoch": 2})).fit(
        TinyNetwork(X.shape[1], Y.shape[1]), X, Y
    )
    short_schedule = Trainer(TrainConfig(**CONFIG | {"val_fraction": 0.0, "epochs": 2})).fit(
        TinyNetwork(X.shape[1], Y.shape[1]), X, Y
    )
    assert [h["loss"] for h in first_two.history] == [h["loss"] for h in full.history[:2]]
    assert [h["loss"] for h in short_schedule.history] != [h["loss"] for h in full.history[:2]]


# ---------------------------------------------------------------- sparse updates (CatchUpAdam)
def test_sparse_updates_are_adam_steps_when_every_row_is_touched():
    """The same gradients, every row in every step: CatchUpAdam and Adam make the same steps."""
    networks = {flag: TinyNetwork(40, 6) for flag in (False, True)}
    optimizers = {}
    for flag, network in networks.items():
        tables = sparse_update_tables(network, flag)
        optimizers[flag] = build_optimizers(network, tables, lr=0.01, weight_decay=0.0, device=torch.device("cpu"))
    assert [len(o) for o in optimizers.values()] == [1, 2]
    assert isinstance(optimizers[True][1], CatchUpAdam)
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        grads = {name: torch.randn(p.shape, generator=generator) for name, p in networks[False].named_parameters()}
        for flag, network in networks.items():
            for name, p in network.named_parameters():
                p.grad = grads[name].to_sparse(1) if flag and name == "embed.weight" else grads[name].clone()
            for optimizer in optimizers[flag]:
                optimizer.step()
    for name, weight in weights(networks[False]).items():
        torch.testing.assert_close(weights(networks[True])[name], weight, rtol=0, atol=1e-6, msg=name)


def _train_tables(optimizer_of, steps: int = 300) -> tuple[torch.Tensor, torch.Tensor]:
    """Fit an Embedding and an EmbeddingBag to fixed targets through batches that read a few
    rows each (rows 0–9 often, the other 290 rarely), with a cosine learning rate; returns
    both tables' final weights."""
    torch.manual_seed(0)
    tables = [nn.Embedding(300, 8), nn.EmbeddingBag(300, 8, mode="sum")]
    generator = torch.Generator().manual_seed(1)
    targets = [torch.randn(300, 8, generator=generator), torch.randn(8, generator=generator)]
    optimizer = optimizer_of(tables)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = 0.01 * (1 + math.cos(math.pi * step / steps)) / 2
        ids = torch.randint(0, 10 if step % 3 == 0 else 300, (4,), generator=generator)
        weights_of_ids = torch.rand(4, generator=generator)
        optimizer.zero_grad()
        loss = ((tables[0](ids) - targets[0][ids]) ** 2).sum()
        loss = loss + ((tables[1](ids, torch.tensor([0, 2]), per_sample_weights=weights_of_ids) - targets[1]) ** 2).sum()
        loss.backward()
        optimizer.step()
    if isinstance(optimizer, CatchUpAdam):
        optimizer.flush()
    return tables[0].weight.detach(), tables[1].weight.detach()


def test_catch_up_adam_makes_dense_adams_steps_on_rows_read_now_and_then():
    """Gradients taken where the weights are (rows are caught up before a forward pass reads
    them), moves of skipped steps made in closed form: after a flush the tables equal dense
    Adam's, where lazy Adam (SparseAdam) ends far from them."""
    def sparse_tables(tables):
        for table in tables:
            table.sparse = True
        return tables

    def catch_up(tables):
        optimizer = CatchUpAdam([t.weight for t in sparse_tables(tables)], lr=0.01)
        for table in tables:
            optimizer.watch(table)
        return optimizer

    dense = _train_tables(lambda tables: torch.optim.Adam([t.weight for t in tables], lr=0.01))
    caught_up = _train_tables(catch_up)
    lazy = _train_tables(lambda tables: torch.optim.SparseAdam([t.weight for t in sparse_tables(tables)], lr=0.01))
    for ours, reference, theirs in zip(caught_up, dense, lazy):
        torch.testing.assert_close(ours, reference, rtol=0, atol=2e-5)
        assert (theirs - reference).abs().max() > 0.05


def test_catch_up_adam_defers_moves_of_unread_rows_until_they_are_read_or_flushed():
    table = nn.Embedding(10, 2, sparse=True)
    optimizer = CatchUpAdam(table.parameters(), lr=0.1)
    optimizer.watch(table)
    for ids in ([3], [7], [7]):
        optimizer.zero_grad()
        table(torch.tensor(ids)).sum().backward()
        before = table.weight.detach().clone()
        optimizer.step()
    moved = (table.weight.detach() - before).abs().sum(1)
    assert moved[3] == 0 and moved[7] > 0  # row 3's momentum moves wait
    state = optimizer.state[table.weight]
    assert state["last_step"].tolist() == [0, 0, 0, 1, 0, 0, 0, 3, 0, 0]
    optimizer.flush()
    assert state["last_step"].tolist() == [3] * 10
    assert (table.weight.detach() - before).abs().sum(1)[3] > 0


def test_catch_up_adam_state_survives_the_checkpoint_format_exactly():
    """Per-row step counters stay exact integers through save and load (torch would cast
    them to the weights' float32, which is exact only below 2^24)."""
    table = nn.Embedding(5, 2, sparse=True)
    optimizer = CatchUpAdam(table.parameters())
    table(torch.tensor([1])).sum().backward()
    optimizer.step()
    optimizer.state[table.weight]["last_step"][1] = 2**25 + 1
    tensors, rest = flatten_optimizer_state(optimizer)
    restored = CatchUpAdam(nn.Embedding(5, 2, sparse=True).parameters())
    restored.load_state_dict(unflatten_optimizer_state(tensors, rest))
    state = next(iter(restored.state.values()))
    assert state["last_step"].dtype == torch.int64 and int(state["last_step"][1]) == 2**25 + 1
    assert int(state["step"]) == 1


@pytest.mark.parametrize("grad_clip", [None, 0.05])  # 0.05 clips most steps here
def test_trainer_with_sparse_updates_trains_like_dense_adam(grad_clip):
    """Through the trainer (hooks, clipping, flush at each epoch's end) the weights stay within
    1e-3 of dense Adam's (8e-5 and 2.4e-4 measured; lazy Adam ends 0.08 and 0.13 away)."""
    X, Y = make_data()
    config = TrainConfig(**CONFIG | {"epochs": 4, "grad_clip": grad_clip})
    dense = TinyNetwork(X.shape[1], Y.shape[1])
    sparse = TinyNetwork(X.shape[1], Y.shape[1])
    dense_result = Trainer(config).fit(dense, X, Y)
    sparse_result = Trainer(replace(config, sparse_updates=True)).fit(sparse, X, Y)
    assert sparse.embed.sparse and not dense.embed.sparse
    for name, weight in weights(dense).items():
        torch.testing.assert_close(weights(sparse)[name], weight, rtol=0, atol=1e-3, msg=name)
    assert [h["loss"] for h in sparse_result.history] == pytest.approx([h["loss"] for h in dense_result.history], rel=1e-4)


def test_clip_grad_norm_takes_sparse_gradients_like_torch_takes_dense_ones():
    X, Y = make_data(n=16)
    grads = {}
    for flag in (False, True):
        network = TinyNetwork(40, 6)
        network.embed.sparse = flag
        network.eval().loss(SparseBatch.from_csr(X), LabelBatch.from_csr(Y)).backward()
        if flag:
            clip_grad_norm_(network.parameters(), 0.01)
        else:
            nn.utils.clip_grad_norm_(network.parameters(), 0.01)
        grads[flag] = {name: p.grad.to_dense() for name, p in network.named_parameters()}
    for name, grad in grads[False].items():
        torch.testing.assert_close(grads[True][name], grad, msg=name)
    assert float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads[True].values()]))) == pytest.approx(0.01, rel=1e-4)


def test_resuming_a_checkpoint_of_the_previous_format_is_one_clear_error(tmp_path):
    X, Y = make_data()
    Trainer(TrainConfig(**CONFIG | {"epochs": 1})).fit(TinyNetwork(40, 6), X, Y, run_dir=tmp_path)
    path = tmp_path / CHECKPOINT_TENSORS
    with safe_open(str(path), framework="pt") as f:
        tensors = {name: f.get_tensor(name) for name in f.keys()}
        state = json.loads(f.metadata()["trainer_state"])
    state["format"] = "holoxmc-trainer-checkpoint/1"
    save_file(tensors, str(path), metadata={"trainer_state": json.dumps(state)})
    with pytest.raises(InputError, match="checkpoint format .*/1.*new run directory"):
        Trainer(TrainConfig(**CONFIG | {"epochs": 2})).fit(TinyNetwork(40, 6), X, Y, run_dir=tmp_path, resume=True)


def test_read_share_counts_distinct_columns_or_tokens_per_batch():
    X = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1]], np.float32))
    assert read_share(X, np.arange(4), batch_size=2, n_rows=4) == pytest.approx((2 / 4 + 1 / 4) / 2)
    tokens = np.array([[3, 3, 0], [5, 0, 0], [1, 2, 4]])
    assert read_share(tokens, np.array([2, 0, 1]), batch_size=2, n_rows=10) == pytest.approx((5 / 10 + 2 / 10) / 2)
    assert read_share(X, np.arange(4), batch_size=1, n_rows=4, n_batches=2) == pytest.approx((2 / 4 + 1 / 4) / 2)


WIDE = AUTO_MIN_ROWS * 2  # a batch of 32 rows x 6 features reads about 1 % of its rows


@pytest.mark.parametrize(
    "n_features, overrides, expected",
    [(WIDE, {}, True), (WIDE, {"setting": False}, False), (40, {"setting": True}, True),
     (AUTO_MIN_ROWS - 1, {}, False),  # a small table: dense Adam's step on it is cheap
     (WIDE, {"batch_size": 4096}, False),  # batches that read most of the table
     (WIDE, {"weight_decay": 1e-4}, False), (WIDE, {"device": torch.device("cuda")}, False),
     (WIDE, {"world": 2}, False)],
)
def test_auto_sparse_updates_where_they_were_measured_faster(n_features, overrides, expected):
    X, _ = make_data(n=4096, n_features=n_features)
    args = {"setting": "auto", "batch_size": 32, "weight_decay": 0.0, "device": torch.device("cpu"), "world": 1}
    args |= overrides
    setting, batch_size = args.pop("setting"), args.pop("batch_size")
    network = TinyNetwork(n_features, 6)
    assert choose_sparse_updates(setting, network, X, np.arange(X.shape[0]), batch_size, **args) is expected
    assert choose_sparse_updates("auto", nn.Linear(3, 2), X, np.arange(8), 4, **args | {"world": 1}) is False


@pytest.mark.parametrize("n_features, chosen", [(WIDE, True), (40, False)])
def test_auto_trains_exactly_as_the_setting_it_chooses(n_features, chosen):
    X, Y = make_data(n_features=n_features)
    config = TrainConfig(**CONFIG | {"refit": True})
    assert config.sparse_updates == "auto"  # the default
    auto, explicit = TinyNetwork(n_features, 6), TinyNetwork(n_features, 6)
    result = Trainer(config).fit(auto, X, Y)
    expected = Trainer(replace(config, sparse_updates=chosen)).fit(explicit, X, Y)
    assert result.sparse_updates is chosen and result.refit.sparse_updates is chosen
    assert auto.embed.sparse is chosen
    assert_same_weights(weights(auto), weights(explicit))
    untimed = [[{k: v for k, v in h.items() if k != "seconds"} for h in r.history] for r in (result, expected)]
    assert untimed[0] == untimed[1]
