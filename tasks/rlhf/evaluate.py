"""Score a policy on held-out prompts: sample one completion each and average the reward."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch


@torch.no_grad()
def sample_completions(model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int, temperature: float,
                       seed: int, batch_size: int = 16) -> list[str]:
    """One sampled completion per prompt (left-padded batches, ``do_sample`` at ``temperature``)."""
    was_training = model.training
    model.eval()
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    torch.manual_seed(seed)
    out: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            batch = tokenizer(prompts[start:start + batch_size], return_tensors="pt", padding=True)
            ids = model.generate(**batch, do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                 max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
            new = ids[:, batch["input_ids"].size(1):]  # (b, <= max_new_tokens)
            out += tokenizer.batch_decode(new, skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return out


def distinct_word_ratio(texts: list[str]) -> float:
    """Mean over texts of (distinct words / words): a cheap degeneration check (reward-hacked word salads score low)."""
    ratios = [len(set(words)) / len(words) for words in (t.lower().split() for t in texts) if words]
    return float(np.mean(ratios)) if ratios else 0.0


def evaluate_policy(model: Any, tokenizer: Any, prompts: list[str], reward_fn: Callable[..., list[float]],
                    max_new_tokens: int, temperature: float, seed: int) -> dict[str, Any]:
    """Mean reward of one sampled completion per prompt, plus a few samples."""
    completions = sample_completions(model, tokenizer, prompts, max_new_tokens, temperature, seed)
    rewards = [float(r) for r in reward_fn(prompts=prompts, completions=completions)]
    return {"mean_reward": float(np.mean(rewards)), "prompts": len(prompts),
            "distinct_words": distinct_word_ratio(completions),
            "samples": [{"prompt": p, "completion": c, "reward": r}
                        for p, c, r in list(zip(prompts, completions, rewards))[:5]]}
