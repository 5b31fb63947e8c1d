"""`ad train rl`: files written, resume continues step count and optimiser state, NaN stops, bad input exits 2."""
import math

import pytest
import torch

from ad.cli import main
from ad.config import make_config
from ad.errors import UserError
from models.rl.config import TrainRLConfig
from models.rl.model import ADTransformer
from models.training import OptimConfig, lr_multiplier
from benchmarks.helpers.synthetic_goals import write_synthetic_dataset
from models.rl.train import train

TINY = dict(n_layer=1, n_head=2, n_embd=16, n_ff=32, context=20, batch_size=4, warmup_steps=2, val_every=3,
            val_batches=2, log_every=2, checkpoint_every=2, progress=False, threads=1)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_synthetic_dataset(tmp_path_factory.mktemp("data") / "syn", num_tasks=3, length=200)


def config(data, out, **kw):
    return make_config(TrainRLConfig, {**TINY, "data": str(data), "out": str(out), **kw})


def read_ckpt(out):
    return torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)


def test_lr_schedule_warms_up_then_decays_to_the_floor():
    optim = OptimConfig(learning_rate=1e-3, min_lr=1e-5, warmup_steps=10, decay_steps=110)
    assert lr_multiplier(0, optim) == pytest.approx(0.1)
    assert lr_multiplier(9, optim) == pytest.approx(1.0)
    assert lr_multiplier(60, optim) == pytest.approx(0.01 + 0.99 * 0.5)
    assert lr_multiplier(110, optim) == pytest.approx(0.01)
    assert lr_multiplier(10_000, optim) == pytest.approx(0.01)
    assert all(lr_multiplier(s, optim) >= lr_multiplier(s + 1, optim) for s in range(10, 200))
    assert not math.isnan(lr_multiplier(0, OptimConfig(warmup_steps=0, decay_steps=0)))


def test_train_writes_run_files_and_resume_continues(dataset, tmp_path):
    out = tmp_path / "run"
    model_dir = train(config(dataset, out, max_steps=4))
    assert model_dir == out / "model"
    assert (out / "config.yaml").is_file() and (out / "model" / "config.json").is_file()
    assert list((out / "tb").glob("events.out.tfevents*"))
    first = read_ckpt(out)
    assert first["global_step"] == 4
    adam_step = lambda ckpt: float(next(iter(ckpt["optimizer_states"][0]["state"].values()))["step"])  # noqa: E731
    assert adam_step(first) == 4
    model = ADTransformer.from_pretrained(model_dir)
    assert model.config.num_states == 9 and model.config.num_actions == 5 and model.config.episode_length == 10

    with pytest.raises(UserError, match="already holds a training run"):
        train(config(dataset, out, max_steps=8))
    with pytest.raises(UserError, match="same options"):
        train(config(dataset, out, max_steps=8, resume=True, learning_rate=0.5))
    train(config(dataset, out, max_steps=8, resume=True))
    second = read_ckpt(out)
    assert second["global_step"] == 8 and adam_step(second) == 8  # optimiser state carried over, not restarted


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(dataset, tmp_path):
    out = tmp_path / "run"
    train(config(dataset, out, max_steps=2, reward_kind="continuous"))
    bad = write_synthetic_dataset(tmp_path / "nan", num_tasks=3, length=200, nan_rewards=True)
    with pytest.raises(UserError, match="column 'reward' holds nan"):  # non-finite data is refused on read
        train(config(bad, out, max_steps=6, resume=True, reward_kind="continuous"))
    with pytest.raises(UserError, match="loss became (nan|inf)"):  # a diverging run stops at its first bad loss
        train(config(dataset, tmp_path / "diverging", max_steps=6, reward_kind="continuous", learning_rate=1e30,
                     grad_clip=0.0))
    ckpt = read_ckpt(out)
    assert ckpt["global_step"] == 2
    assert all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())


def test_expert_only_trains(dataset, tmp_path):
    train(config(dataset, tmp_path / "expert", max_steps=2, expert_only=True, context=10))
    assert (tmp_path / "expert" / "model" / "model.safetensors").is_file()


def test_history_start_share_trains_and_is_recorded(dataset, tmp_path):
    train(config(dataset, tmp_path / "starts", max_steps=2, history_start_share=0.5))
    assert "history_start_share: 0.5" in (tmp_path / "starts" / "config.yaml").read_text()


def test_bf16_mixed_trains_float32_weights_and_resumes_in_float32(dataset, tmp_path):
    out = tmp_path / "bf16"
    train(config(dataset, out, max_steps=4, precision="bf16-mixed"))
    ckpt = read_ckpt(out)
    assert ckpt["global_step"] == 4
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all() for v in ckpt["state_dict"].values()
               if v.is_floating_point())  # the weights stay float32; only the products ran in bfloat16
    assert "precision: bf16-mixed" in (out / "config.yaml").read_text()
    train(config(dataset, out, max_steps=6, resume=True))  # precision is not part of the run: it may change on resume
    assert read_ckpt(out)["global_step"] == 6
    assert ADTransformer.from_pretrained(out / "model").config.num_states == 9


def test_bf16_mixed_warns_where_the_cpu_emulates_bfloat16(dataset, tmp_path, monkeypatch, capsys):
    import ad.config.groups

    monkeypatch.setattr(ad.config.groups, "cpu_has_fast_bfloat16", lambda: False)
    monkeypatch.setattr(ad.config.groups, "bfloat16_slowdown", lambda: 6.5)
    monkeypatch.setattr(ad.config.groups, "_cuda_available", lambda: False)
    config(dataset, tmp_path / "r", precision="bf16-mixed")
    assert "--precision bf16-mixed on a CPU without AMX or AVX512-BF16" in capsys.readouterr().err
    monkeypatch.setattr(ad.config.groups, "cpu_has_fast_bfloat16", lambda: True)
    config(dataset, tmp_path / "r", precision="bf16-mixed")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("args, message", [
    (["--preset", "nope"], "invalid choice: 'nope'"),
    (["--context", "5000"], "longer than every stream"),
    (["--num-actions", "7"], "does not fit dataset"),
    (["--num-rewards", "1"], "not one of the integers"),
    (["--resume"], "nothing to resume"),
    (["--history-start-share", "1.5"], "--history-start-share must be between 0 and 1, got 1.5"),
    (["--history-start-share", "nan"], "--history-start-share (ad train rl options): expected a finite number"),
    (["--precision", "16-true"], "invalid choice: '16-true'"),
])
def test_bad_input_exits_2(dataset, tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "rl", "--data", str(dataset), "--out", str(tmp_path / "r"), "--progress", "false", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_unreadable_checkpoint_exits_2(dataset, tmp_path, capsys):
    out = tmp_path / "r"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "last.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "rl", "--data", str(dataset), "--out", str(out), "--resume", "--progress", "false"])
    assert exit_info.value.code == 2
    assert "unreadable" in capsys.readouterr().err


def test_missing_dataset_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "rl", "--data", str(tmp_path / "none"), "--out", str(tmp_path / "r")])
    assert exit_info.value.code == 2
    assert "not a learning-history dataset" in capsys.readouterr().err


def test_parameter_groups_decay_weight_matrices_only():
    from models.rl.config import ADConfig
    from models.rl.module import parameter_groups

    model = ADTransformer(ADConfig(n_layer=1, n_head=2, n_embd=16, n_ff=32, context=8, num_states=9, num_actions=5,
                                   episode_length=10))
    decay, no_decay = parameter_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert len(decay["params"]) + len(no_decay["params"]) == len(names)
    assert all(p.dim() == 2 and "emb" not in names[id(p)] for p in decay["params"])
    assert any("emb" in names[id(p)] for p in no_decay["params"]) and any(p.dim() == 1 for p in no_decay["params"])
