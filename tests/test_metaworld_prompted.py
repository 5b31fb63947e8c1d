"""benchmarks/metaworld_prompted.py: AD's context filled with the source's own first episodes before it acts."""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.metaworld_prompted import PromptedPolicy, prompt_of, source_success  # noqa: E402


class Spy:
    """A stand-in policy that records what it is given and acts with zeros."""

    def __init__(self):
        self.calls, self.resets = [], []

    def reset(self, num_envs):
        self.resets.append(num_envs)

    def act(self, obs, prev_action, prev_reward, timestep, first):
        self.calls.append((obs.clone(), prev_action.clone(), prev_reward.clone(), timestep.clone(), first.clone()))
        return torch.zeros((len(obs), 2))


def prompt(envs=3, steps=4):
    rng = np.random.default_rng(0)
    return {"states": rng.normal(size=(envs, steps, 5)).astype(np.float32),
            "actions": rng.normal(size=(envs, steps, 2)).astype(np.float32),
            "rewards": rng.normal(size=(envs, steps)).astype(np.float32),
            "timesteps": np.tile(np.arange(steps), (envs, 1))}


def test_the_prompt_is_teacher_forced_and_the_first_real_step_continues_it():
    spy, p = Spy(), prompt()
    policy = PromptedPolicy(spy, p)
    policy.reset(3)
    assert spy.resets == [3] and len(spy.calls) == 4
    assert bool(spy.calls[0][4].all()) and not any(bool(c[4].any()) for c in spy.calls[1:])  # first only at the start
    for t in range(1, 4):  # each prompt step gets the prompt's previous action and reward, not the policy's own
        assert torch.equal(spy.calls[t][0], torch.from_numpy(p["states"][:, t]))
        assert torch.equal(spy.calls[t][1], torch.from_numpy(p["actions"][:, t - 1]))
        assert torch.equal(spy.calls[t][2], torch.from_numpy(p["rewards"][:, t - 1]))
    obs = torch.ones((3, 5))
    policy.act(obs, torch.zeros((3, 2)), torch.zeros(3), torch.zeros(3, dtype=torch.long), torch.ones(3, dtype=bool))
    _, prev_a, prev_r, _, first = spy.calls[-1]
    assert torch.equal(prev_a, torch.from_numpy(p["actions"][:, -1]))  # the context goes on from the prompt's end
    assert torch.equal(prev_r, torch.from_numpy(p["rewards"][:, -1]))
    assert not bool(first.any())
    policy.act(obs, torch.full((3, 2), 7.0), torch.full((3,), 8.0), torch.ones(3, dtype=torch.long),
               torch.zeros(3, dtype=bool))
    assert float(spy.calls[-1][1][0, 0]) == 7.0  # later steps pass through unchanged


def test_an_empty_prompt_is_the_plain_policy():
    spy = Spy()
    policy = PromptedPolicy(spy, prompt(steps=0))
    policy.reset(3)
    assert spy.calls == []
    first = torch.ones(3, dtype=bool)
    policy.act(torch.ones((3, 5)), torch.zeros((3, 2)), torch.zeros(3), torch.zeros(3, dtype=torch.long), first)
    assert bool(spy.calls[-1][4].all())  # the run starts a fresh context, as ad eval does


class Stream:
    def __init__(self, episodes, length, hits):
        episode = np.repeat(np.arange(episodes), length)
        self.columns = {"episode": episode, "step": np.tile(np.arange(length), episodes),
                        "state": np.zeros((episodes * length, 3)), "action": np.zeros((episodes * length, 2)),
                        "reward": np.arange(episodes * length, dtype=np.float32),
                        "success": np.isin(episode, hits) & (np.tile(np.arange(length), episodes) == length - 1)}


def test_prompt_of_takes_the_first_k_episodes_and_source_success_reads_each_episode():
    streams = [Stream(3, 4, hits=[1, 2]), Stream(3, 4, hits=[2])]
    p = prompt_of(streams, 2)
    assert p["states"].shape == (2, 8, 3) and p["rewards"][0, -1] == 7.0
    assert prompt_of(streams, 0)["states"].shape == (2, 0, 3)
    assert [source_success(streams, e) for e in range(3)] == [0.0, 0.5, 1.0]


@pytest.mark.slow
def test_with_an_empty_prompt_the_diagnostic_is_the_plain_evaluation(tmp_path):
    """k = 0 reproduces ad eval's own in-context run of AD on the held-out goals (a tiny demo run)."""
    from ad.commands.evaluate import pick_tasks
    from ad.evaluate import run_in_context
    from ad.history import HistoryReader
    from ad.registry import env_factory, load_policy
    from benchmarks.metaworld_ad import QUICK, run_seed
    from benchmarks.metaworld_prompted import run_folder

    run_seed({**QUICK, "seed": 0}, tmp_path / "seed0")
    got = run_folder(tmp_path / "seed0", [0, 1], 2, 0, 0)
    reader = HistoryReader(str(tmp_path / "seed0" / "metaworld"))
    tasks = pick_tasks(reader, "heldout", None)
    setup = env_factory(reader.family)(reader.metadata, tasks, 1)
    plain = run_in_context(load_policy(str(tmp_path / "seed0" / "ad"), greedy=False, seed=0), setup, 2, 0,
                           progress=False)
    assert got["by_prompt"][0]["ad"] == plain.extra["success"].reshape(len(tasks), 2).mean(0).tolist()
    assert got["by_prompt"][0]["ad_return"] == plain.returns.mean((0, 1)).tolist()  # the same actions, step by step
    assert got["by_prompt"][1]["ad_return"] != got["by_prompt"][0]["ad_return"]  # the prompt changes what AD does
    assert len(got["by_prompt"][1]["source"]) == 2


@pytest.mark.parametrize("argv, message", [
    (["--episodes", "0"], "--episodes must be >= 1"),
    (["--prompts", "-1"], "--prompts value >= 0"),
    (["--work", "nowhere"], "does not exist: run the metaworld_ad config"),
])
def test_bad_options_end_with_one_error_line(argv, message, tmp_path, capsys, monkeypatch):
    from benchmarks import metaworld_prompted
    from cli_run import script_error

    monkeypatch.chdir(tmp_path)
    assert message in script_error(capsys, monkeypatch, metaworld_prompted.main, "metaworld_prompted.py", *argv)
