"""ad generate rlhf on a tiny random LM: every completion logged once, logprobs recomputable, resume, bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ad.config import make_config
from ad.errors import UserError

REWARD_MODULE = '''
import os
calls = 0

def score(prompts, completions, **kw):
    """Deterministic reward; misbehaves when RLHF_TEST_BAD is set: raise / nan / count, at call RLHF_TEST_AT."""
    global calls
    calls += 1
    mode, at = os.environ.get("RLHF_TEST_BAD", ""), int(os.environ.get("RLHF_TEST_AT", "1"))
    values = [(len(c) % 7) / 7.0 for c in completions]
    if mode and calls >= at:
        if mode == "raise":
            raise ValueError("boom")
        if mode == "nan":
            values[0] = float("nan")
        if mode == "count":
            values = values[:-1]
    return values
'''


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from benchmarks.helpers.tiny_lm import build_tiny  # test-only helper; tasks/ itself never imports models

    return str(build_tiny(tmp_path_factory.mktemp("tiny") / "model", n_layer=1, width=32))


@pytest.fixture
def reward_module(tmp_path, monkeypatch):
    (tmp_path / "rlhf_test_reward.py").write_text(REWARD_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    sys.modules.pop("rlhf_test_reward", None)
    importlib.invalidate_caches()
    return "rlhf_test_reward:score"


def _cfg(out, model, **kw):
    from tasks.rlhf.config import GenerateConfig

    values = dict(out=str(out), model=model, max_steps=3, chunk_steps=2, num_generations=2, prompts_per_step=2,
                  max_new_tokens=6, eval_prompts=2, threads=1, tensorboard=False, plots=False, progress=False)
    values.update(kw)
    return make_config(GenerateConfig, values)


def _rows(out):
    from ad.history import HistoryReader

    return HistoryReader(str(out)).table().to_pylist()


def test_every_completion_logged_once_with_recomputable_logprobs(tmp_path, tiny_model):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from ad.history import HistoryReader
    from tasks.rlhf.generate import generate

    out = tmp_path / "d"
    generate(_cfg(out, tiny_model, plots=True, tensorboard=True))
    rows = _rows(out)
    assert len(rows) == 3 * 4  # steps x (prompts_per_step x num_generations): nothing dropped or repeated
    assert sorted(HistoryReader(str(out)).tasks()) == ["sentiment-c0000", "sentiment-c0001"]
    keys = {(r["task"], r["stream"], r["episode"]) for r in rows}
    assert len(keys) == len(rows)
    assert sorted(r["update"] for r in rows) == [0] * 4 + [1] * 4 + [2] * 4
    meta = HistoryReader(str(out)).metadata
    train_prompts = set(meta["prompts"]["train"])
    assert all(r["state"] in train_prompts for r in rows) and not train_prompts & set(meta["prompts"]["heldout"])
    assert (out / "_run" / "reward_curve.png").is_file() and any((out / "_run" / "tb").iterdir())
    for r in rows:
        assert len(r["logprob"]) == len(r["completion_ids"]) > 0 and math.isfinite(r["advantage"])

    # recompute: rows of update 0 under the base model (LoRA starts as a no-op), rows of update 2 under the
    # adapter saved after 2 updates; temperature 1
    def check(model, update):
        for r in (r for r in rows if r["update"] == update):
            ids = torch.tensor([r["prompt_ids"] + r["completion_ids"]])  # (1, P + C)
            with torch.no_grad():
                logits = model(ids).logits[0, len(r["prompt_ids"]) - 1:-1]  # (C, V) predicting each completion token
            lp = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(r["completion_ids"])[:, None])[:, 0]
            np.testing.assert_allclose(lp.numpy(), np.asarray(r["logprob"]), atol=2e-4)

    base = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    check(base, 0)
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model),
                                        str(out / "_run" / "checkpoints" / "checkpoint-2")).eval()
    check(adapted, 2)


def test_resume_after_interruption_loses_and_duplicates_nothing(tmp_path, tiny_model, reward_module, monkeypatch):
    from ad.history import HistoryReader
    from tasks.rlhf.generate import generate

    out = tmp_path / "d"
    cfg = _cfg(out, tiny_model, max_steps=5, reward=reward_module)
    monkeypatch.setenv("RLHF_TEST_BAD", "raise")
    monkeypatch.setenv("RLHF_TEST_AT", "4")  # call 1 = evaluation before training; dies in iteration 2 (unit c0001)
    with pytest.raises(UserError, match="training iteration 2"):
        generate(cfg)
    assert HistoryReader(str(out)).tasks() == ["sentiment-c0000"]  # only the finished chunk is visible
    assert len(_rows(out)) == 2 * 4

    monkeypatch.delenv("RLHF_TEST_BAD")
    generate(cfg)  # same arguments: resumes from checkpoint-2
    rows = _rows(out)
    assert len(rows) == 5 * 4
    assert sorted(r["update"] for r in rows) == sorted(list(range(5)) * 4)
    assert len({(r["task"], r["stream"], r["episode"]) for r in rows}) == len(rows)
    generate(cfg)  # everything committed: nothing more written
    assert len(_rows(out)) == 5 * 4


def test_generate_to_a_memory_url_reads_back_and_resumes(tmp_path, tiny_model, monkeypatch):
    """--out memory://...: the dataset goes through ad.history; checkpoints, summary and plots to a local run
    folder (runs/generate-<name>); the same command again resumes from that folder (memory:// lives in this
    process, so everything runs in-process)."""
    import uuid

    from ad.history import HistoryReader
    from tasks.rlhf.generate import generate

    monkeypatch.chdir(tmp_path)
    url = f"memory://rlhf-{uuid.uuid4().hex[:8]}/sentiment"
    summary = generate(_cfg(url, tiny_model, plots=True, tensorboard=True))
    reader = HistoryReader(url)
    rows = reader.table().to_pylist()
    assert len(rows) == 3 * 4 and reader.tasks() == ["sentiment-c0000", "sentiment-c0001"]
    assert all(len(r["logprob"]) == len(r["completion_ids"]) > 0 for r in rows)
    run = tmp_path / "runs" / "generate-sentiment"
    assert (run / "checkpoints" / "checkpoint-3").is_dir() and (run / "reward_curve.png").is_file()
    assert (run / "summary.json").is_file() and any((run / "tb").iterdir()) and summary["rows_this_run"] == 12
    assert not (tmp_path / "memory:").exists() and not list(tmp_path.glob("rlhf-*"))  # nothing local named after it
    again = generate(_cfg(url, tiny_model))  # everything committed: the final adapter is loaded, nothing written
    assert again["rows_this_run"] == 0 and "after" in again and len(HistoryReader(url).table()) == 12
    other = f"memory://rlhf-{uuid.uuid4().hex[:8]}/sentiment"  # same name, other dataset: the run folder is taken
    with pytest.raises(UserError, match="--run-dir"):
        generate(_cfg(other, tiny_model))
    generate(_cfg(other, tiny_model, max_steps=1, run_dir=str(tmp_path / "other-run"), eval_prompts=0))
    assert len(HistoryReader(other).table()) == 4 and (tmp_path / "other-run" / "checkpoints" / "checkpoint-1").is_dir()


def test_checkpoint_newer_than_last_unit_is_discarded(tmp_path, tiny_model):
    from ad.history import HistoryWriter
    from tasks.rlhf.generate import dataset_metadata
    from tasks.rlhf.prompts import load_prompts, split_prompts
    from tasks.rlhf.rollouts import SPEC
    from tasks.trl_runs.checkpoints import resume_point

    cfg = _cfg(tmp_path / "d", tiny_model, max_steps=6)
    train, heldout = split_prompts(load_prompts(cfg.prompts), cfg.heldout_fraction, cfg.seed)
    writer = HistoryWriter(cfg.out, SPEC, "rlhf", dataset_metadata(cfg, train, heldout))
    ckpt = tmp_path / "d" / "_run" / "checkpoints"
    (ckpt / "checkpoint-2").mkdir(parents=True)
    assert resume_point(writer, out=cfg.out, seed=cfg.seed, chunk_steps=cfg.chunk_steps, steps=cfg.max_steps,
                        ckpt_dir=ckpt) is None  # saved before a crash, its unit never committed
    assert not (ckpt / "checkpoint-2").exists()


@pytest.mark.parametrize("mode,message", [("raise", "raised ValueError: boom"), ("nan", "finite number"),
                                          ("count", "returned 3 values for 4")])
def test_bad_reward_stops_with_clear_message_and_no_corrupt_unit(tmp_path, tiny_model, reward_module, monkeypatch,
                                                                 mode, message):
    from ad.history import HistoryReader
    from tasks.rlhf.generate import generate

    monkeypatch.setenv("RLHF_TEST_BAD", mode)
    monkeypatch.setenv("RLHF_TEST_AT", "1")
    out = tmp_path / "d"
    with pytest.raises(UserError, match=message):
        generate(_cfg(out, tiny_model, reward=reward_module, eval_prompts=0))
    assert HistoryReader(str(out)).tasks() == []


def test_bad_inputs(tmp_path, tiny_model):
    from tasks.rlhf.generate import generate

    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n\n")
    with pytest.raises(UserError, match="holds 0 prompt"):
        generate(_cfg(tmp_path / "a", tiny_model, prompts=str(empty)))
    with pytest.raises(UserError, match="neither a known name"):
        generate(_cfg(tmp_path / "b", "no-such-org/no-such-model"))
    with pytest.raises(UserError, match="cannot import module"):
        generate(_cfg(tmp_path / "c", tiny_model, reward="no_such_module_xyz:f"))
    with pytest.raises(UserError, match="num-generations"):
        _cfg(tmp_path / "d", tiny_model, num_generations=1)


def test_cli_exit_code_2_on_empty_prompt_file(tmp_path):
    import subprocess
    import sys

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    proc = subprocess.run([sys.executable, "-m", "ad", "generate", "rlhf", "--out", str(tmp_path / "o"),
                           "--prompts", str(empty)], capture_output=True, text=True)
    assert proc.returncode == 2 and "prompt file" in proc.stderr and "Traceback" not in proc.stderr


def test_bundled_prompts_and_vader():
    from tasks.rlhf.config import BUNDLED_PROMPTS
    from tasks.rlhf.prompts import load_prompts, split_prompts
    from tasks.rlhf.reward import vader

    prompts = load_prompts(BUNDLED_PROMPTS)
    assert len(prompts) >= 200
    train, heldout = split_prompts(prompts, 0.2, 0)
    assert len(heldout) == 48 and not set(train) & set(heldout) and len(train) + len(heldout) == len(prompts)
    good, bad = vader(completions=["a wonderful, happy day", "a terrible, awful loss"])
    assert good > 0.5 and bad < -0.5


def test_distinct_word_ratio_flags_word_salad():
    from tasks.rlhf.evaluate import distinct_word_ratio

    fluent = " her heart swelled with joy. She smiled and said that the trip was worth every mile"
    salad = " smiled wonderful beautiful wonderful wonderful beautiful wonderful lovely wonderful wonderful"
    assert distinct_word_ratio([fluent]) > 0.85 > 0.5 > distinct_word_ratio([salad])
    assert distinct_word_ratio(["", "a b"]) == 1.0 and distinct_word_ratio([]) == 0.0


def test_progress_in_a_log_is_plain_lines(tmp_path, tiny_model, capsys, monkeypatch):
    """With stdout not a terminal, GRPO training prints `GRPO: step n/N ...` lines, not tqdm's carriage returns."""
    from tasks.rlhf.generate import generate

    monkeypatch.setenv("AD_PROGRESS_SECONDS", "0")
    generate(_cfg(tmp_path / "d", tiny_model, progress=True, eval_prompts=0))
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.startswith("GRPO: step")]
    assert lines and "step 3/3" in lines[-1] and "done in" in lines[-1], out
    assert "\r" not in out + err
