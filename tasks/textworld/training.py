"""The model side of ``ad generate textworld``: policies, the SFT model (trained once, its adapter saved), the PPO
model / learner and their per-iteration checkpoints (the resume points)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ad.files import atomic_path
from tasks.textworld.config import GenerateConfig
from tasks.textworld.policy import TextWorldPolicy
from tasks.textworld.ppo import PPOLearner
from tasks.textworld.ppo_moves import Moves, collect_moves
from tasks.textworld.rollouts import Episode
from tasks.textworld.sft import train_sft

SFT_ADAPTER = "sft-adapter"


def policy_factory(cfg: GenerateConfig, tokenizer: Any) -> Callable[[Any, Any], TextWorldPolicy]:
    """``make(model, value_head)`` -> a policy with the run's prompt limit and batch."""
    def make(model: Any, value_head: Any) -> TextWorldPolicy:
        return TextWorldPolicy(model, tokenizer, value_head, cfg.max_prompt_tokens, cfg.act_batch, cfg.transcript)
    return make


def sft_model(cfg: GenerateConfig, model: Any, tokenizer: Any, demos: Sequence[Episode], run_dir: Path,
              log: Callable[[str], None]) -> Any:
    """The SFT policy with its LoRA merged: trained on ``demos`` once, then loaded from the saved adapter."""
    from peft import PeftModel

    folder = run_dir / SFT_ADAPTER
    if (folder / "adapter_config.json").is_file():
        log(f"SFT adapter found in {folder}: not retraining")
        peft = PeftModel.from_pretrained(model, str(folder))
    else:
        torch.manual_seed(cfg.seed)
        peft = train_sft(model, tokenizer, demos, run_dir / "sft-trainer", epochs=cfg.sft_epochs,
                         lr=cfg.sft_learning_rate, batch_size=cfg.sft_batch_size,
                         max_prompt_tokens=cfg.max_prompt_tokens, lora=cfg.lora_dict(), seed=cfg.seed,
                         progress=cfg.progress, micro_batch_size=cfg.sft_micro_batch_size, transcript=cfg.transcript)
        tmp = folder.with_name(folder.name + ".tmp")
        peft.save_pretrained(str(tmp))
        os.replace(tmp, folder) if not folder.exists() else None
    merged = peft.merge_and_unload()
    merged.eval()
    return merged


def merge_for_evaluation(model: Any) -> Any:
    """Fold the PPO adapter into the weights for the final greedy evaluation (the same policy at the merged SFT
    model's speed). Call it only once the last PPO checkpoint is saved."""
    model.merge_adapter()  # peft: W <- W + scale * B @ A for every adapted layer, in the weights' dtype
    return model


def ppo_learner(cfg: GenerateConfig, model: Any, tokenizer: Any) -> PPOLearner:
    """The PPO optimiser with a value head (zero-initialised: values start at 0) on the LM's hidden size."""
    hidden = model.get_base_model().config.hidden_size
    head = torch.nn.Linear(hidden, 1, device=next(model.parameters()).device)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    return PPOLearner(model, head, lr=cfg.ppo_learning_rate, clip=cfg.clip, value_clip=cfg.value_clip,
                      vf_coef=cfg.vf_coef, kl_coef=cfg.beta, epochs=cfg.ppo_epochs, batch_size=cfg.ppo_batch_size,
                      pad_id=_pad(tokenizer), seed=cfg.seed, target_kl=cfg.ppo_target_kl,
                      temperature=cfg.temperature, micro_batch_size=cfg.ppo_micro_batch_size)


def _pad(tokenizer: Any) -> int:
    return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)


def collect(cfg: GenerateConfig, episodes: Sequence[Episode], model: Any, tokenizer: Any) -> Moves:
    """An iteration's moves with GAE and reference log-probabilities."""
    return collect_moves(episodes, model, cfg.gamma, cfg.gae_lambda, _pad(tokenizer), batch=cfg.ppo_batch_size,
                         transcript=cfg.transcript, ratio=cfg.ppo_ratio)


def save_ppo_checkpoint(run_dir: Path, iteration: int, model: Any, learner: PPOLearner) -> None:
    """Adapter, value head, optimiser and shuffling state after ``iteration`` iterations (written atomically)."""
    from peft import get_peft_model_state_dict

    state = {"iteration": iteration, "adapter": get_peft_model_state_dict(model),
             "value_head": learner.value_head.state_dict(), "optimizer": learner.optimizer.state_dict(),
             "generator": learner.generator.get_state()}
    path = run_dir / "ppo-checkpoint.pt"
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_ppo_checkpoint(run_dir: Path, model: Any, learner: PPOLearner) -> int:
    """Restore the last PPO checkpoint if there is one; returns the iterations it covers (0 if none)."""
    from peft import set_peft_model_state_dict

    path = run_dir / "ppo-checkpoint.pt"
    if not path.is_file():
        return 0
    state = torch.load(path, map_location="cpu", weights_only=False)  # load_state_dict copies to the weights' device
    set_peft_model_state_dict(model, state["adapter"])
    learner.value_head.load_state_dict(state["value_head"])
    learner.optimizer.load_state_dict(state["optimizer"])
    learner.generator.set_state(state["generator"])
    return int(state["iteration"])
