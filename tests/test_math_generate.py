"""ad generate math on a tiny random LM: every solution logged once with recomputable logprobs, the KL to the
reference and its refresh every k iterations, resume, the Language template, bad input."""
import json
import shutil

import numpy as np
import pytest

from ad.errors import UserError


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from benchmarks.helpers.tiny_lm import build_tiny  # test-only helper; tasks/ itself never imports models

    return str(build_tiny(tmp_path_factory.mktemp("tiny") / "model", n_layer=1, width=32))


def _cfg(out, model, **kw):
    from tasks.math.config import GenerateConfig

    opts = dict(out=str(out), model=model, max_steps=3, chunk_steps=2, num_generations=2, problems_per_step=2,
                max_new_tokens=6, eval_problems=4, threads=1, plots=False, progress=False, ref_refresh=2,
                train_problems=20, temperature=1.0, format_reward=0.0)
    opts.update(kw)
    return GenerateConfig(**opts)


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory, tiny_model):
    """A finished 2-iteration dataset (copied by the tests that must not damage it)."""
    from tasks.math.generate import generate

    out = tmp_path_factory.mktemp("small") / "d"
    generate(_cfg(out, tiny_model, max_steps=2, eval_problems=0))
    return out


def _rows(out):
    from ad.history import HistoryReader

    return HistoryReader(str(out)).table().to_pylist()


def test_every_solution_logged_once_with_recomputable_logprobs(tmp_path, tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ad.formats import get_template
    from ad.history import HistoryReader
    from tasks.math.generate import generate

    out = tmp_path / "d"
    summary = generate(_cfg(out, tiny_model, plots=True))
    rows = _rows(out)
    assert len(rows) == 3 * 4  # iterations x (problems x generations): nothing dropped or repeated
    assert sorted(HistoryReader(str(out)).tasks()) == ["math-c0000", "math-c0001"]
    assert len({(r["stream"], r["episode"]) for r in rows}) == len(rows)
    assert sorted(r["update"] for r in rows) == [0] * 4 + [1] * 4 + [2] * 4
    meta = HistoryReader(str(out)).metadata
    held = set(meta["problems"]["heldout_templates"])
    assert all(r["problem_id"].split("-")[0] not in held for r in rows)
    assert summary["before"]["problems"] == 4 and "format_failures" in summary["after"]
    assert (out / "_run" / "reward_curve.png").is_file() and json.loads((out / "_run" / "summary.json").read_text())
    for r in rows:
        assert len(r["logprob"]) == len(r["completion_ids"]) > 0 and r["state"] in r["prompt"]
        assert r["reward"] == 0.0 or r["answer"] in r["action"]
    assert all(r["kl"] == pytest.approx(0.0, abs=1e-5) for r in rows if r["update"] == 0)  # reference = policy

    # rows of update 0 under the base model (the LoRA adapter starts as a no-op), temperature 1
    base, tok = AutoModelForCausalLM.from_pretrained(tiny_model).eval(), AutoTokenizer.from_pretrained(tiny_model)
    for r in (r for r in rows if r["update"] == 0):
        prompt = tok(r["prompt"])["input_ids"]
        ids = torch.tensor([prompt + r["completion_ids"]])  # (1, P + C)
        with torch.no_grad():
            logits = base(ids).logits[0, len(prompt) - 1:-1]  # (C, V) predicting each completion token
        lp = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(r["completion_ids"])[:, None])[:, 0]
        np.testing.assert_allclose(lp.numpy(), np.asarray(r["logprob"]), atol=2e-4)

    template = get_template(meta["task_spec"]["template"])
    text = template.render({k: [r[k] for r in rows[:2]] for k in ("state", "action", "reward")})
    assert [(p["state"], p["action"]) for p in template.parse(text)] == [(r["state"], r["action"]) for r in rows[:2]]


def _kl_by_update(tmp_path, tiny_model, **kw):
    """KL column per update of a short run whose reward (the first character's code mod 7: it varies within
    every group) moves the policy."""
    from tasks.math.generate import build_trainer, load_split, training_rows
    from ad.lm.pretrained import load_base

    cfg = _cfg(tmp_path / "unused", tiny_model, max_steps=5, chunk_steps=5, max_new_tokens=8,
               learning_rate=0.05 if kw.get("lora", True) else 0.005,
               num_generations=4, **kw)
    model, tokenizer = load_base(cfg.model)
    batches, ref = [], {}

    def reward(prompts, completions, completion_ids, **extra):
        values = [float(ord(c[0]) % 7) if c else 0.0 for c in completions]
        ref["t"].ad_scored(prompts, completions, completion_ids, values,
                           {k: extra[k] for k in ("question", "problem_id", "answer")})
        return values

    split = load_split(cfg)
    trainer = build_trainer(cfg, model, tokenizer, training_rows(cfg, tokenizer, split["train"], []), reward,
                            lambda update, batch: batches.append((update, batch["kl"])), tmp_path / "ck", [])
    ref["t"] = trainer
    trainer.train()
    return {u: np.abs(kl).max() for u, kl in batches}


@pytest.mark.slow
@pytest.mark.parametrize("lora", [True, False], ids=["lora-ref-adapter", "full-trl-sync"])
def test_reference_refresh_every_k_iterations_resets_the_kl(tmp_path, tiny_model, lora):
    never = _kl_by_update(tmp_path, tiny_model, refresh=False, lora=lora)
    assert never[0] < 1e-5 and all(never[u] > 1e-4 for u in (1, 2, 3, 4))  # the policy moves away from it
    every2 = _kl_by_update(tmp_path, tiny_model, ref_refresh=2, lora=lora)
    assert all(every2[u] < 1e-5 for u in (0, 2, 4)) and all(every2[u] > 1e-4 for u in (1, 3))


@pytest.mark.slow
def test_resume_after_interruption_loses_and_duplicates_nothing(tmp_path, tiny_model, monkeypatch):
    from tasks.math import generate as gen
    from tasks.math.rollouts import MathRolloutLog

    out = tmp_path / "d"
    real = MathRolloutLog.commit
    calls = {"n": 0}

    def crash_on_second(self, chunk, info):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, chunk, info)

    monkeypatch.setattr(MathRolloutLog, "commit", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        gen.generate(_cfg(out, tiny_model, max_steps=4))
    assert len(_rows(out)) == 2 * 4
    monkeypatch.setattr(MathRolloutLog, "commit", real)
    gen.generate(_cfg(out, tiny_model, max_steps=4))
    rows = _rows(out)
    assert sorted(r["update"] for r in rows) == sorted([u for u in range(4) for _ in range(4)])


def test_gsm8k_file_problems(tmp_path, tiny_model):
    from tasks.math.generate import generate

    path = tmp_path / "g.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} plus 1?", "answer": f"#### {i + 1}"}) + "\n"
                            for i in range(10)))
    out = tmp_path / "g"
    generate(_cfg(out, tiny_model, problems=str(path), max_steps=2, eval_problems=3))
    assert {r["problem_id"] for r in _rows(out)} <= {f"p{i:06d}" for i in range(10)}


@pytest.mark.parametrize("argv, message", [
    (["--ref-refresh", "0"], "--ref-refresh must be a positive"),
    (["--ref-refresh", "-3"], "--ref-refresh must be a positive"),
    (["--level", "7"], "unknown difficulty --level 7"),
    (["--beta", "nan"], "beta"),
    (["--problems", "BAD"], "BAD:2: not valid JSON"),
    (["--problems", "NOANSWER"], "NOANSWER:1: the answer"),
    (["--preset", "laptop"], "unknown preset 'laptop'; choose one of: cpu, standard"),
    (["--engine", "fast", "--no-lora"], "--engine fast trains a LoRA adapter"),
])
def test_bad_input_is_one_line_exit_2_and_keeps_the_dataset(tmp_path, tiny_model, small_dataset, capsys, argv,
                                                             message):
    from ad import cli

    out = tmp_path / "d"
    shutil.copytree(small_dataset, out)
    before = sorted(p.name for p in out.rglob("*.parquet"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{"question": \n')
    noanswer = tmp_path / "noanswer.jsonl"
    noanswer.write_text('{"question": "q", "answer": "no final number"}\n{"question": "r", "answer": "#### 2"}\n')
    argv = [{"BAD": str(bad), "NOANSWER": str(noanswer)}.get(a, a) for a in argv]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "math", "--out", str(out), "--model", tiny_model, "--max-steps", "2",
                  "--progress", "false", *argv])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith("error:") and "\n" not in err and message.replace(
        "BAD", str(bad)).replace("NOANSWER", str(noanswer)) in err
    assert sorted(p.name for p in out.rglob("*.parquet")) == before and len(_rows(out)) == 2 * 4


def test_config_rejects_bad_values(tiny_model):
    for kw in ({"num_generations": 1}, {"heldout_fraction": 1.0}, {"temperature": 0.0}, {"few_shot": -1},
               {"beta": 0.0}):
        with pytest.raises(UserError):
            _cfg("x", tiny_model, **kw)
    assert _cfg("x", tiny_model, beta=0.0, refresh=False).refresh_every is None


def test_fast_engine_logs_every_solution_with_recomputable_logprobs_and_kl(tmp_path, tiny_model, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ad.config import make_config
    from tasks.math.config import GenerateConfig
    from tasks.math.generate import generate

    from tasks.math import reinforce

    # a reward that varies within every group (a random tiny LM never answers right), so the policy moves
    monkeypatch.setattr(reinforce, "score", lambda text, answer, fmt: float(ord(text[0]) % 7) if text else 0.0)
    out = tmp_path / "d"
    opts = dict(out=str(out), model=tiny_model, preset="cpu", max_steps=4, chunk_steps=2, num_generations=3,
                problems_per_step=2, max_new_tokens=6, eval_problems=3, threads=1, plots=False, progress=False,
                ref_refresh=2, train_problems=20, temperature=1.0, format_reward=0.0, learning_rate=0.05,
                dtype="float32")  # float32 weights: the recompute below is then exact on any CPU (the preset
    cfg = make_config(GenerateConfig, opts)  # itself picks bfloat16 where the CPU has AVX512-BF16 or AMX)
    assert cfg.engine == "fast" and cfg.problems_per_step == 2  # the preset, explicit options over it
    summary = generate(cfg)
    rows = _rows(out)
    assert len(rows) == 4 * 6 and sorted(r["update"] for r in rows) == [u for u in range(4) for _ in range(6)]
    assert len({(r["stream"], r["episode"]) for r in rows}) == len(rows)
    assert set(summary["phase_seconds"]) == {"sampling", "reference", "update", "logging"}
    assert (out / "_run" / "checkpoints" / "checkpoint-4" / "adapter_model.safetensors").is_file()
    # reference = policy right after a refresh (updates 0 and 2): KL exactly 0; the update between moved it
    kl = {u: max(abs(r["kl"]) for r in rows if r["update"] == u) for u in range(4)}
    assert kl[0] == kl[2] == 0.0 and kl[1] > 1e-6 and kl[3] > 1e-6
    base, tok = AutoModelForCausalLM.from_pretrained(tiny_model).eval(), AutoTokenizer.from_pretrained(tiny_model)
    for r in (r for r in rows if r["update"] == 0):  # update 0 sampled from the base model
        prompt = tok(r["prompt"])["input_ids"]
        with torch.no_grad():
            logits = base(torch.tensor([prompt + r["completion_ids"]])).logits[0, len(prompt) - 1:-1]
        lp = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(r["completion_ids"])[:, None])[:, 0]
        np.testing.assert_allclose(lp.numpy(), np.asarray(r["logprob"]), atol=2e-4)
        assert r["terminated"] == (r["completion_ids"][-1] == tok.eos_token_id)


def test_fast_engine_resume_is_the_uninterrupted_run(tmp_path, tiny_model, monkeypatch):
    from ad.config import make_config
    from tasks.math.config import GenerateConfig
    from tasks.math.generate import generate
    from tasks.math.rollouts import MathRolloutLog

    def cfg(out):
        return make_config(GenerateConfig, dict(out=str(out), model=tiny_model, preset="cpu", max_steps=4,
                                                chunk_steps=2, num_generations=2, problems_per_step=2,
                                                max_new_tokens=6, eval_problems=0, threads=1, plots=False,
                                                progress=False, ref_refresh=2, train_problems=20, learning_rate=0.05,
                                                refresh=False))

    generate(cfg(tmp_path / "whole"))
    real, calls = MathRolloutLog.commit, {"n": 0}

    def crash_on_second(self, chunk, info):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, chunk, info)

    monkeypatch.setattr(MathRolloutLog, "commit", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        generate(cfg(tmp_path / "cut"))
    assert len(_rows(tmp_path / "cut")) == 2 * 4
    monkeypatch.setattr(MathRolloutLog, "commit", real)
    generate(cfg(tmp_path / "cut"))
    key = lambda r: (r["update"], r["stream"], r["episode"])  # noqa: E731
    whole, cut = sorted(_rows(tmp_path / "whole"), key=key), sorted(_rows(tmp_path / "cut"), key=key)
    assert [r["completion_ids"] for r in whole] == [r["completion_ids"] for r in cut]
    np.testing.assert_allclose([r["kl"] for r in whole], [r["kl"] for r in cut], atol=1e-5)


def test_bfloat16_on_a_cpu_that_emulates_it_warns_with_the_measured_cost(monkeypatch, capsys):
    import torch

    import ad.config.groups
    from ad.config import make_config
    from tasks.math.config import GenerateConfig
    from benchmarks.common import resolve_dtype

    monkeypatch.setattr(ad.config.groups, "_cuda_available", lambda: False)
    monkeypatch.setattr(ad.config.groups, "cpu_has_fast_bfloat16", lambda: False)
    monkeypatch.setattr(ad.config.groups, "bfloat16_slowdown", lambda: 7.25)
    assert make_config(GenerateConfig, {"dtype": "bfloat16", "engine": "fast"}).dtype == "bfloat16"
    err = capsys.readouterr().err
    assert err.count("warning: --dtype bfloat16") == 1 and "measured 7.2x slower than in float32" in err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_dtype("auto") == torch.float32 and resolve_dtype("bfloat16") == torch.bfloat16
    monkeypatch.setattr(ad.config.groups, "cpu_has_fast_bfloat16", lambda: True)
    assert resolve_dtype("auto") == torch.bfloat16


def test_bfloat16_slowdown_is_a_positive_ratio():
    from ad.config.groups import bfloat16_slowdown

    ratio = bfloat16_slowdown(size=8, width=16, repeats=1)
    assert np.isfinite(ratio) and ratio > 0
