"""The DPT objective of `ad train rl` (``--objective dpt``): windows carry the optimal action of every row, the action
head learns it (nothing else changes), ``--expert-only`` is ``--objective ed``, and a family without optimal actions
is refused with a one-line error."""
import contextlib
import io

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml

from ad import registry
from ad.cli import main
from ad.config import make_config
from ad.data import RLDataModule
from ad.errors import UserError
from ad.formats.rl import TARGETS, build_window_source
from ad.history.reader import Stream
from benchmarks.helpers.synthetic_goals import synthetic_batches, write_synthetic_dataset
from models.rl.config import ADConfig, TrainRLConfig
from models.rl.model import ADTransformer
from tasks.bandit.instances import arm_means, parse_task_name

TINY_MODEL = dict(n_layer=1, n_head=2, n_embd=16, n_ff=32)


@pytest.fixture(scope="module")
def bandit_data(tmp_path_factory):
    command = registry.get("generate", "bandit")
    out = tmp_path_factory.mktemp("bandit") / "data"
    with contextlib.redirect_stdout(io.StringIO()):
        command.run(make_config(command.config_cls, {"out": str(out), "instances": 8, "pulls": 24,
                                                     "heldout_fraction": 0.25, "progress": False}))
    return out


def test_targets_are_computed_on_whole_streams_then_selected_with_the_episodes():
    n = 12
    columns = {"episode": np.repeat(np.arange(6), 2), "step": np.tile([0, 1], 6), "state": np.arange(n),
               "action": np.zeros(n, np.int64), "reward": np.zeros(n, np.float32), "logprob": np.zeros(n, np.float32)}
    source = build_window_source([Stream("t", 0, 0, columns)], window=4, every=2,
                                 targets=lambda stream: 100 + np.arange(len(stream)))
    kept = np.array([0, 1, 4, 5, 8, 9])  # rows of episodes 0, 2, 4
    assert source.columns[TARGETS].dtype == np.int64
    assert source.columns[TARGETS].tolist() == (100 + kept).tolist()
    assert source.gather([1])[TARGETS].tolist() == [(100 + kept[1:5]).tolist()]
    plain = build_window_source([Stream("t", 0, 0, columns)], window=4)
    assert TARGETS not in plain.columns and TARGETS not in plain.gather([0])


def test_dpt_windows_target_each_instance_best_arm(bandit_data):
    data = RLDataModule(bandit_data, window=6, batch_size=4, optimal_targets=True)
    data.setup()
    for dataset in (data.train_set, data.val_set):
        source = dataset.source
        for w in range(0, len(source), 7):
            task = source.streams[source.stream_of_start[w]][0]
            best = int(np.argmax(arm_means(*parse_task_name(task))))
            assert source.gather([w])[TARGETS].tolist() == [[best] * 6]
    batch = next(iter(data.train_dataloader()))
    assert batch[TARGETS].shape == batch["actions"].shape and batch[TARGETS].dtype == torch.int64


def test_the_action_loss_reads_the_targets_and_nothing_else_changes():
    torch.manual_seed(0)
    model = ADTransformer(ADConfig(**TINY_MODEL, context=8, num_states=9, num_actions=5, episode_length=10))
    batch = synthetic_batches(1, 3, 8)[0]
    targets = (batch["actions"] + 1) % 5
    _, plain = model.compute_loss(batch)
    _, dpt = model.compute_loss({**batch, TARGETS: targets})
    with torch.no_grad():
        logits = model(batch["states"], batch["actions"], batch["rewards"], batch["timesteps"])["action"]
    assert dpt["action_nll"] == pytest.approx(float(F.cross_entropy(logits.flatten(0, 1), targets.flatten())))
    assert dpt["action_nll"] != pytest.approx(float(plain["action_nll"]))
    for key in ("reward_loss", "state_loss"):  # the outcome heads still learn the transitions actually taken
        assert dpt[key] == pytest.approx(float(plain[key]))


def test_ad_train_rl_objective_dpt_trains_on_a_bandit_dataset(bandit_data, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exit_info:
        main(["train", "rl", "--data", str(bandit_data), "--out", str(tmp_path / "dpt"), "--objective", "dpt",
              "--context", "12", "--batch-size", "2", "--max-steps", "3", "--warmup-steps", "1", "--n-layer", "1",
              "--n-embd", "16", "--n-head", "2", "--n-ff", "32", "--progress", "false", "--val-every", "0"])
    assert exit_info.value.code == 0
    saved = yaml.safe_load((tmp_path / "dpt" / "config.yaml").read_text())
    assert saved["objective"] == "dpt" and not saved["expert_only"]
    assert (tmp_path / "dpt" / "model" / "model.safetensors").is_file()


def test_expert_only_is_objective_ed():
    assert make_config(TrainRLConfig, {"expert_only": True}).objective == "ed"
    cfg = make_config(TrainRLConfig, {"objective": "ed"})
    assert cfg.expert_only  # recorded the same way as before in config.yaml
    with pytest.raises(UserError, match="--expert-only means --objective ed"):
        make_config(TrainRLConfig, {"expert_only": True, "objective": "dpt"})


def test_dpt_on_a_family_without_optimal_actions_exits_2(tmp_path, capsys):
    data = write_synthetic_dataset(tmp_path / "syn", num_tasks=3, length=60)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "rl", "--data", str(data), "--out", str(tmp_path / "r"), "--objective", "dpt",
              "--context", "10", "--progress", "false"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "does not provide" in err and "'synthetic'" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()  # refused before anything was written
