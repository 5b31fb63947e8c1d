"""``ad generate textworld`` end to end with a tiny random LM: every phase's units, the Language format, resume."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ad.config import make_config
from ad.errors import UserError
from ad.history import HistoryReader
from tasks.textworld.config import GenerateConfig

TINY = dict(eval_games=1, sft_games=2, sft_epochs=1.0, sft_batch_size=4, ppo_iterations=1, ppo_games=1, ppo_epochs=1,
            ppo_batch_size=4, step_limit=3, history=1, max_prompt_tokens=96, lora_r=2, threads=1, progress=False)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from benchmarks.helpers.tiny_lm import build_tiny

    return str(build_tiny(tmp_path_factory.mktemp("tiny"), width=32, max_positions=1024))


@pytest.mark.slow  # ~20 s alone on 2 cores (a tiny LM through every phase, twice)
def test_generate_logs_every_phase_and_resumes(tmp_path, tiny_model):
    from ad.formats.language import get_template
    from tasks.textworld.generate import generate

    out = tmp_path / "tw"
    cfg = make_config(GenerateConfig, {"out": str(out), "model": tiny_model, **TINY})
    generate(cfg)
    reader = HistoryReader(out)
    names = {"base-test", "base-train", "gold", "sft-test", "sft-train", "ppo-i0000", "ppo-test", "ppo-train"}
    assert set(reader.tasks()) == names
    table = reader.table().to_pydict()
    phases = set(table["phase"])
    assert phases == {"base", "gold", "sft", "ppo"}
    for i, phase in enumerate(table["phase"]):
        assert table["state"][i].endswith("Action:")
        if phase == "gold":
            assert len(table["logprob"][i]) == 0
        else:
            assert len(table["logprob"][i]) >= 1 and all(np.isfinite(table["logprob"][i]))
    ppo_rows = [i for i, t in enumerate(table["task"]) if t == "ppo-i0000"]
    assert ppo_rows and all(np.isfinite(table["value"][i]) for i in ppo_rows)
    assert reader.metadata["task_spec"]["template"] == "textworld"
    assert set(reader.metadata["split"]["heldout"]) == {"base-test", "sft-test", "ppo-test"}
    summary = json.loads((out / "_run" / "summary.json").read_text())
    assert {"base-test", "sft-train", "ppo-test"} <= set(summary["results"])
    assert (out / "_run" / "phases.png").is_file()
    # read back, every evaluation game's end agrees with the counts the run summarised
    from benchmarks.helpers.textworld_outcomes import game_outcomes

    outcomes = game_outcomes(str(out))
    for unit in ("base-test", "sft-train", "ppo-test"):
        games = outcomes[f"{unit} (run 0)"]
        for end in ("success", "failed", "limit", "context"):
            assert sum(g["end"] == end for g in games) == summary["results"][unit][f"ended_{end}"]
    # Language format: a row renders as prompt + " command" + reward and parses back
    template = get_template("textworld")
    row = {k: table[k][0] for k in ("state", "action", "reward")}
    text = template.render({k: [v] for k, v in row.items()})
    assert template.parse(text) == [{"state": row["state"], "action": row["action"],
                                     "reward": pytest.approx(row["reward"], abs=1e-4)}]
    # resume: drop the last units, re-run, get the same rows back (nothing duplicated)
    before = {t: reader.table(tasks=[t]).num_rows for t in names}
    for unit in ("ppo-test", "ppo-train"):
        shutil.rmtree(out / f"task={unit}")
    generate(cfg)
    after = HistoryReader(out)
    assert {t: after.table(tasks=[t]).num_rows for t in names} == before


@pytest.mark.slow  # ~15 s alone on 2 cores
def test_generate_with_transcripts_logs_whole_games_as_states(tmp_path):
    from benchmarks.helpers.tiny_lm import build_tiny
    from tasks.textworld.generate import generate

    model = str(build_tiny(tmp_path / "tiny", width=32, max_positions=8192))
    out = tmp_path / "tw"
    cfg = make_config(GenerateConfig, {"out": str(out), "model": model, **TINY, "transcript": True,
                                       "max_prompt_tokens": 8192, "sft_batch_size": 2, "sft_micro_batch_size": 1})
    generate(cfg)
    reader = HistoryReader(out)
    assert reader.metadata["task_spec"]["transcript"] is True
    table = reader.table().to_pydict()
    assert set(table["phase"]) == {"base", "gold", "sft", "ppo"}
    rows = list(zip(table["task"], table["episode"], table["step"], table["state"], table["action"]))
    extended = 0
    for (task, ep, step, state, action), (task2, ep2, step2, state2, _) in zip(rows, rows[1:]):
        assert "Moves so far" not in state
        if (task, ep) == (task2, ep2) and step2 == step + 1:  # the next move's prompt extends this one's
            assert state2.startswith(state + " " + action + "\n# STEP ")
            extended += 1
    assert extended > 0


def test_loops_count_command_pairs_that_come_back():
    from benchmarks.helpers.textworld_outcomes import loops

    moves = ["go east", "go west", "go east", "go west", "open fridge", "take apple", "open fridge", "close fridge"]
    assert loops(moves) == {("go east", "go west"): 1}
    assert loops(["look", "look", "look", "look"]) == {}  # one command repeated is not a pair


def test_paired_outcomes_count_the_games_each_phase_won():
    """SFT -> PPO on the same games: 3 won by both, 1 by SFT only, 9 by PPO only, 2 by neither; McNemar's exact
    p = P(at most 1 of 10 discordant games on one side, doubled) = 2 * 11 / 1024; games matched by seed, not order."""
    from benchmarks.helpers.textworld_outcomes import paired

    ends = [("success", "success")] * 3 + [("success", "failed")] + [("limit", "success")] * 9 + \
        [("failed", "limit")] * 2
    before = [{"game_seed": s, "end": a, "score": 1.0 if a == "success" else 0.25} for s, (a, _) in enumerate(ends)]
    after = [{"game_seed": s, "end": b, "score": 1.0 if b == "success" else 0.5} for s, (_, b) in enumerate(ends)]
    c = paired(before, list(reversed(after)))
    assert (c["games"], c["both"], c["before_only"], c["after_only"], c["neither"]) == (15, 3, 1, 9, 2)
    assert c["mcnemar_p"] == pytest.approx(2 * 11 / 1024)
    assert c["score_rose"] == 11 and c["score_fell"] == 1
    assert c["score_change"] == pytest.approx((9 * 0.75 + 2 * 0.25 - 0.5) / 15)
    assert paired(before, before)["mcnemar_p"] == 1.0
    with pytest.raises(ValueError, match="different games"):
        paired(before, after[:-1])


@pytest.mark.parametrize("bad", [{"step_limit": 0}, {"game": "zork"}, {"gamma": float("nan")}, {"eval_games": 0},
                                 {"ppo_learning_rate": float("inf")}, {"beta": -1.0}, {"ppo_target_kl": float("nan")},
                                 {"ppo_target_kl": -0.01}, {"ppo_ratio": "tokens"},
                                 {"ppo_micro_batch_size": -1}, {"train_eval_games": -1},
                                 {"train_eval_games": 1001},
                                 {"dtype": "float16"}, {"pinned_commands": [""]},
                                 {"transcript": True, "step_limit": 32, "max_prompt_tokens": 512},
                                 {"sft_batch_size": 8, "sft_micro_batch_size": 3}])
def test_bad_options_are_user_errors(bad):
    with pytest.raises(UserError):
        make_config(GenerateConfig, bad)


def test_train_eval_games_sets_the_train_fold_evaluation_apart_from_the_held_out_one(tmp_path):
    """--train-eval-games 2 with --eval-games 3: 3 held-out games, the first 2 SFT games evaluated on the train
    fold (also when they are more than --sft-games), recorded in the dataset's metadata."""
    from tasks.textworld.generate import Run

    for extra, expect in (({"train_eval_games": 2}, 2), ({}, 3), ({"train_eval_games": 5, "sft_games": 1}, 5)):
        cfg = make_config(GenerateConfig, {"out": str(tmp_path / str(expect)), "eval_games": 3, "sft_games": 4,
                                           **extra})
        run = Run(cfg)
        try:
            assert len(run.test_games) == 3 and len(run.train_eval) == expect
            assert run.train_eval[:len(run.sft_games)] == run.sft_games[:expect]
            assert run.writer.metadata["games"]["train_eval"] == [s for _, s in run.train_eval]
        finally:
            run.writer.close()


def test_pinned_commands_none_pins_nothing():
    assert make_config(GenerateConfig, {"pinned_commands": ["none"]}).pinned_commands == []
    assert make_config(GenerateConfig, {}).pinned_commands == ["read cookbook"]
