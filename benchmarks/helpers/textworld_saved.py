"""A run's trained policies outside its run folder, and their evaluation on another machine.

``export_adapters`` writes the SFT adapter and the last PPO checkpoint's adapter (with its value head) as one small
safetensors file each (bfloat16 by default: ~10 MB for SmolLM2-135M at LoRA rank 16): what a GPU session can bring
back when its time budget stops ``ad generate textworld`` after PPO but before the after-PPO evaluation.
``evaluate_saved`` then plays the run's evaluation games greedily with those policies (the same game draws as
``ad generate textworld`` with the same options) and writes the units ``sft-test``, ``sft-train``, ``ppo-test``,
``ppo-train`` of a new dataset (resumable, read by ``benchmarks/textworld_games.py`` and ``benchmarks/textworld.py
--recorded``); ``_run/saved.json`` records which files they came from.

    from benchmarks.helpers.textworld_saved import export_adapters, evaluate_saved
    export_adapters(Path("data/textworld/_run"), Path("back"))      # back/sft-adapter.safetensors, ppo-adapter...
    evaluate_saved(cfg, Path("back/sft-adapter.safetensors"), Path("back/ppo-adapter.safetensors"))
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from ad.files import atomic_path, write_json_atomic
from ad.errors import UserError
from tasks.textworld.config import GenerateConfig

SFT_FILE, PPO_FILE = "sft-adapter.safetensors", "ppo-adapter.safetensors"
_VALUE_HEAD = "value_head."  # prefix of the value head's tensors in a PPO adapter file


def export_adapters(run_dir: Path, dest: Path, dtype: str = "bfloat16") -> dict[str, Path]:
    """Write ``run_dir``'s SFT adapter and (if there is one) its last PPO checkpoint's adapter + value head to
    ``dest`` as ``sft-adapter.safetensors`` / ``ppo-adapter.safetensors`` in ``dtype``; returns the files written.
    The PPO file's metadata records the iterations the checkpoint covers."""
    from safetensors.torch import load_file, save_file

    from tasks.textworld.training import SFT_ADAPTER

    cast = getattr(torch, dtype)
    sft = run_dir / SFT_ADAPTER / "adapter_model.safetensors"
    if not sft.is_file():
        raise UserError(f"{run_dir} holds no SFT adapter ({sft} is missing): the run has not finished SFT yet")
    dest.mkdir(parents=True, exist_ok=True)
    written = {"sft": dest / SFT_FILE}
    with atomic_path(written["sft"]) as tmp:
        save_file({k: v.to(cast).contiguous() for k, v in load_file(str(sft)).items()}, str(tmp),
                  metadata={"source": str(sft)})
    checkpoint = run_dir / "ppo-checkpoint.pt"
    if checkpoint.is_file():
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        tensors = {k: v.to(cast).contiguous() for k, v in state["adapter"].items()}
        tensors.update({_VALUE_HEAD + k: v.to(cast).contiguous() for k, v in state["value_head"].items()})
        written["ppo"] = dest / PPO_FILE
        with atomic_path(written["ppo"]) as tmp:
            save_file(tensors, str(tmp),
                      metadata={"source": str(checkpoint), "iteration": str(int(state["iteration"]))})
    return written


def load_adapter(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """An exported adapter file's tensors (float32) and metadata."""
    from safetensors import safe_open

    if not path.is_file():
        raise UserError(f"adapter file {path} does not exist")
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: f.get_tensor(k).float() for k in f.keys()}, dict(f.metadata() or {})
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file is the user's input
        raise UserError(f"{path} is not a safetensors adapter file ({err})") from None


def with_adapter(model: Any, cfg: GenerateConfig, tensors: dict[str, torch.Tensor], path: Path) -> Any:
    """``model`` with a LoRA of ``cfg``'s options loaded from ``tensors`` and merged into its weights."""
    from peft import get_peft_model, set_peft_model_state_dict

    from ad.config.groups import peft_lora_config

    peft = get_peft_model(model, peft_lora_config(cfg.lora_dict()))
    expected = {k for k, _ in peft.named_parameters() if "lora_" in k}
    try:
        result = set_peft_model_state_dict(peft, tensors)
    except RuntimeError as err:  # shape mismatch: another rank or model
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        why = next((line for line in lines if "size mismatch" in line), lines[0] if lines else "")
        raise UserError(f"{path} does not fit this model with --lora-r {cfg.lora_r} ({why}); pass the options of "
                        "the run that trained it") from None
    missing = [k for k in getattr(result, "missing_keys", []) if k in expected]
    if missing or not tensors:
        raise UserError(f"{path} lacks {len(missing) or len(expected)} of the {len(expected)} LoRA weights of "
                        f"this model (first: {(missing or sorted(expected))[0]}); pass the options of the run that "
                        "trained it (--lora-target-modules, --model)")
    return peft.merge_and_unload().eval()


def _split_ppo(tensors: dict[str, torch.Tensor], sft_tensors: dict[str, torch.Tensor], ppo_file: Path,
               sft_file: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A PPO adapter file's (LoRA weights, value head state), checked against the SFT adapter's LoRA weights."""
    head = {k[len(_VALUE_HEAD):]: v for k, v in tensors.items() if k.startswith(_VALUE_HEAD)}
    lora = {k: v for k, v in tensors.items() if not k.startswith(_VALUE_HEAD)}
    if not head:
        raise UserError(f"{ppo_file} holds no value head: not a PPO adapter written by export_adapters")
    if {k: v.shape for k, v in lora.items()} != {k: v.shape for k, v in sft_tensors.items()}:
        raise UserError(f"{ppo_file} and {sft_file} hold different LoRA weights (names or shapes): they are not the "
                        "PPO and SFT adapters of one run")
    return lora, head


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def evaluate_saved(cfg: GenerateConfig, sft_file: Path, ppo_file: Path | None = None) -> dict[str, Any]:
    """Greedy play of the SFT policy (and the PPO policy on top of it) on ``cfg``'s evaluation games, written to
    ``cfg.out`` as the units ``sft-test`` / ``sft-train`` (and ``ppo-test`` / ``ppo-train``); returns their
    summaries. The LoRA options (``cfg.lora_*``) must be those of the run that trained the adapters."""
    from ad.lm.pretrained import load_base
    from tasks.textworld import training
    from tasks.textworld.generate import Run

    sft_tensors, _ = load_adapter(sft_file)
    ppo_tensors, ppo_meta = load_adapter(ppo_file) if ppo_file is not None else ({}, {})
    lora, head_state = _split_ppo(ppo_tensors, sft_tensors, ppo_file, sft_file) if ppo_file is not None else ({}, {})
    iterations = int(ppo_meta["iteration"]) if "iteration" in ppo_meta else None
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    model, tokenizer = load_base(cfg.model, dtype=cfg.dtype)
    if torch.cuda.is_available():
        model = model.cuda()
    sft = with_adapter(model, cfg, sft_tensors, sft_file)  # checked before anything is written
    policy = training.policy_factory(cfg, tokenizer)
    run = Run(cfg)
    try:
        run.evaluate("sft", 1, lambda: policy(sft, None))
        if ppo_file is not None:
            head = torch.nn.Linear(head_state["weight"].shape[1], 1, device=next(sft.parameters()).device)
            head.load_state_dict(head_state)
            ppo = with_adapter(sft, cfg, lora, ppo_file)
            done = cfg.ppo_iterations if iterations is None else iterations
            run.evaluate("ppo", 2 + done, lambda: policy(ppo, head))
    finally:
        run.writer.close()
    files = {"sft": sft_file, **({"ppo": ppo_file} if ppo_file is not None else {})}
    record = {"seed": cfg.seed, "results": run.results, "dtype": cfg.dtype,
              "adapters": {k: {"file": str(p), "sha256": _sha256(p)} for k, p in files.items()},
              "ppo_iterations": iterations}
    write_json_atomic(run.run_dir / "saved.json", record)
    run.log(f"done -> {cfg.out} (adapters: {', '.join(str(p) for p in files.values())})")
    return run.results
