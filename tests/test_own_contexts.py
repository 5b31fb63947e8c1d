"""A model's own in-context runs as training data: `ad eval --record` writes them as a learning-history dataset of
the evaluated family (the returns are eval.json's to the digit, each action's log-probability is the policy's), and
`ad train rl --init-from` fine-tunes a finished run on them (here DPT on its own contexts, labelled with the family's
optimal actions); bad input is one line and exit 2."""
import json

import numpy as np
import pytest
import torch

from ad.history import HistoryReader
from models.rl.model import ADTransformer
from tasks.keydoor.optimal import optimal_actions
from tests.cli_run import run_cli

QUIET = ("--progress", "false")
TINY = ("--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--n-ff", "32", "--context", "24", "--batch-size", "2",
        "--warmup-steps", "1", *QUIET)


@pytest.fixture(scope="module")
def dpt_run(tmp_path_factory):
    """A tiny Key-to-Door dataset (the noise source) and a DPT trained on it for 3 steps."""
    import contextlib
    import io

    from ad.cli import main

    root = tmp_path_factory.mktemp("own")
    data, run = root / "kd", root / "dpt"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for argv in (["generate", "keydoor", "--source", "noise", "--size", "4", "--tasks", "8", "--steps-per-task",
                      "800", "--num-envs", "2", "--episode-length", "12", "--seed", "1", "--heldout-fraction",
                      "0.25", *QUIET, "--out", str(data)],
                     ["train", "rl", "--data", str(data), "--out", str(run), "--objective", "dpt", "--max-steps",
                      "3", *TINY]):
            with pytest.raises(SystemExit) as exit_info:
                main(argv)
            assert exit_info.value.code == 0
    return data, run


def test_recorded_runs_are_the_evaluated_runs(dpt_run, tmp_path, capsys):
    data, run = dpt_run
    record, out = tmp_path / "own", tmp_path / "eval"
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(run), "--name", "DPT", "--data", str(data), "--split", "train",
                           "--episodes", "3", "--seeds", "2", "--seed", "5", "--record", str(record), "--out",
                           str(out), *QUIET)
    assert code == 0, err
    source, recorded = HistoryReader(data), HistoryReader(record)
    summary = json.loads((out / "eval.json").read_text())
    assert recorded.family == "keydoor" and recorded.spec.state == source.spec.state
    assert recorded.metadata["split"] == source.metadata["split"]  # the same tasks and split
    assert recorded.metadata["source"]["algorithm"] == "in-context"
    assert recorded.metadata["source"]["ckpt"] == str(run)
    assert sorted(recorded.tasks()) == sorted(summary["tasks"]) == sorted(source.metadata["split"]["train"])
    returns = np.asarray(summary["policies"]["DPT"]["returns"])  # (tasks, seeds, episodes)
    for stream in recorded.streams():
        cols = stream.columns
        assert stream.run == 5 and stream.stream in (0, 1)
        assert np.array_equal(np.unique(cols["episode"]), np.arange(3))  # exactly the counted episodes
        per_episode = np.bincount(cols["episode"], weights=cols["reward"])
        t = summary["tasks"].index(stream.task)
        assert np.allclose(per_episode, returns[t, stream.stream])
        assert (cols["step"][cols["episode"] == 0] == np.arange((cols["episode"] == 0).sum())).all()
        ends = cols["terminated"] | cols["truncated"]
        assert ends.sum() == 3 and ends[-1]  # every episode ends once, the stream with the last one
        assert np.isfinite(cols["logprob"]).all() and (cols["logprob"] <= 0).all()
        assert optimal_actions(recorded.metadata, stream.task, cols).shape == cols["action"].shape


def test_logprob_is_the_policys_probability_of_the_action_taken():
    from models.rl.config import ADConfig
    from models.rl.policy import ADPolicy

    torch.manual_seed(0)
    model = ADTransformer(ADConfig(n_layer=1, n_head=2, n_embd=16, n_ff=32, context=8, num_states=9, num_actions=5,
                                   episode_length=10))
    for temperature in (1.0, 0.5):
        policy = ADPolicy(model, greedy=False, generator=torch.Generator().manual_seed(1), temperature=temperature)
        policy.reset(3)
        args = (torch.tensor([0, 4, 8]), torch.zeros(3, dtype=torch.long), torch.zeros(3),
                torch.zeros(3, dtype=torch.long), torch.ones(3, dtype=torch.bool))
        actions = policy.act(*args)
        policy.reset(3)
        expected = torch.log_softmax(policy.logits(*args).float() / temperature, -1).gather(-1, actions[:, None])[:, 0]
        assert torch.allclose(policy.last_logprob, expected)
    greedy = ADPolicy(model, greedy=True)
    greedy.reset(3)
    greedy.act(*args)
    assert greedy.last_logprob.tolist() == [0.0, 0.0, 0.0]


def test_init_from_starts_from_the_runs_weights_and_dpt_fine_tunes_on_its_own_runs(dpt_run, tmp_path, capsys):
    from models.rl.config import TrainRLConfig
    from models.rl.train import initial_weights

    data, run = dpt_run
    record = tmp_path / "own"
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(run), "--data", str(data), "--split", "train", "--episodes",
                           "2", "--seeds", "2", "--record", str(record), "--out", str(tmp_path / "eval"), *QUIET)
    assert code == 0, err
    saved = ADTransformer.from_pretrained(run / "model").state_dict()
    config = TrainRLConfig(data=str(record), out=str(tmp_path / "x"), objective="dpt", init_from=str(run),
                           n_layer=1, n_embd=16, n_head=2, n_ff=32, context=24, num_states=16, num_actions=5,
                           episode_length=12, grid_size=4)
    assert all(torch.equal(saved[k], v) for k, v in initial_weights(config).items())
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(record), "--out", str(tmp_path / "tuned"),
                           "--objective", "dpt", "--init-from", str(run), "--max-steps", "2", "--val-every", "0",
                           *TINY)
    assert code == 0, err
    tuned = ADTransformer.from_pretrained(tmp_path / "tuned" / "model").state_dict()
    assert any(not torch.equal(saved[k], tuned[k]) for k in saved)  # trained on from there


@pytest.mark.parametrize("argv,message", [
    (["--n-embd", "32"], "its model does not fit these options/dataset (n_embd 16 -> 32)"),
    (["--init-from", "nowhere"], "nowhere/model is not a saved AD model"),
])
def test_init_from_a_run_that_does_not_fit_exits_2_before_writing(dpt_run, tmp_path, capsys, argv, message):
    data, run = dpt_run
    base = ["train", "rl", "--data", str(data), "--out", str(tmp_path / "r"), "--objective", "dpt", "--init-from",
            str(run), "--max-steps", "1", *TINY]
    code, err, _ = run_cli(capsys, *base, *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "config.yaml").exists()


def _manifest(folder):
    """dataset.json less the time it was last written (opening a dataset rewrites it, with the same content)."""
    manifest = json.loads((folder / "dataset.json").read_text())
    manifest.pop("updated")
    return manifest


def test_recording_the_same_runs_twice_is_refused_and_another_seed_adds_its_own(dpt_run, tmp_path, capsys):
    data, run = dpt_run
    record = tmp_path / "own"
    common = ["eval", "--ckpt", str(run), "--data", str(data), "--episodes", "2", "--seeds", "1", "--record",
              str(record), *QUIET]
    code, err, _ = run_cli(capsys, *common, "--out", str(tmp_path / "e0"))
    assert code == 0, err
    before = _manifest(record)
    code, err, _ = run_cli(capsys, *common, "--out", str(tmp_path / "e1"))
    assert code == 2 and "already holds the runs of 2 of these tasks with --seed 0" in err
    assert _manifest(record) == before  # nothing written is lost
    code, err, _ = run_cli(capsys, *common, "--seed", "1", "--out", str(tmp_path / "e2"))
    assert code == 0, err
    assert {u["run"] for u in HistoryReader(record).units()} == {0, 1}


def test_recording_counts_in_the_evaluations_memory_check(dpt_run, tmp_path, capsys, monkeypatch):
    """--record keeps every step until the evaluation ends: on a machine too small for that (here 2 GiB), the
    recorded evaluation is refused before anything is written, where the same evaluation unrecorded would fit."""
    import ad.config.memory
    from ad.commands.evaluate import eval_memory_bytes
    from ad.record.rollouts import RolloutRecorder

    data, run = dpt_run
    reader = HistoryReader(data)
    envs, episodes = len(reader.metadata["split"]["heldout"]), 1_000_000
    monkeypatch.setattr(ad.config.memory, "physical_memory_bytes", lambda: 2 << 30)
    budget = ad.config.memory.MEMORY_SHARE * (2 << 30)
    assert eval_memory_bytes(envs, 1, episodes) < budget < RolloutRecorder.memory_bytes(reader, envs, episodes)
    record, out = tmp_path / "own", tmp_path / "eval"
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(run), "--data", str(data), "--episodes", str(episodes),
                           "--seeds", "1", "--record", str(record), "--out", str(out), *QUIET)
    assert code == 2 and "GiB of memory" in err and "--record" in err
    assert not record.exists() and not out.exists()
