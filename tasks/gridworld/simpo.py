"""SimPO phase: ``samples`` sampled move lists per start state, ranked by reward + discounted value of the next state
(the critic advantage up to the shared V(s)), minus ``progress_bonus`` per cell of Manhattan distance to the goal (a
potential-based shaping, Ng et al. 1999); the best and the worst make the preference pair. With ``candidates``
(``--simpo-chosen all``) the chosen list is the best of every valid move list, scored with the env's dynamics.
Trained with :mod:`tasks.gridworld.shared_prefix_simpo` (default) or trl's CPOTrainer (``loss_type="simpo"``);
``nll`` (trl's ``cpo_alpha``) weighs an NLL term on the chosen move list (CPO-SimPO).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ad.lm.agents import Actor, Critic
from tasks.gridworld.prompts import moves_text
from tasks.gridworld.rollouts import Episodes, Rewards


def goal_distance(config: Sequence[int]) -> int:
    """Manhattan distance from the agent to the goal of a config ``(x, y, orientation, goal_x, goal_y)``."""
    return abs(int(config[3]) - int(config[0])) + abs(int(config[4]) - int(config[1]))


def score_move_lists(critic: Critic | None, rewards: Rewards, configs: Sequence[Sequence[int]],
                     move_lists: Sequence[Sequence[int]], gamma: float, progress_bonus: float = 0.0
                     ) -> tuple[np.ndarray, list]:
    """(scores (N,), outcomes) of move list i played from config i: reward plus, if the episode goes on,
    ``gamma * (V(next) - progress_bonus * goal_distance(next))``; outcomes as :meth:`Rewards.outcome`."""
    results = [rewards.outcome(c, m) for c, m in zip(configs, move_lists)]
    values = np.zeros(len(results))
    if critic is not None:
        prompts = [rewards.prompt(nxt) for nxt, _, _, _ in results]
        unique = sorted(set(prompts))  # many lists lead to the same next state
        by_prompt = dict(zip(unique, critic.values(unique)))
        values = np.asarray([by_prompt[p] for p in prompts])
    score = np.asarray([r + (0.0 if (succ or off) else gamma * (float(v) - progress_bonus * goal_distance(nxt)))
                        for (nxt, r, succ, off), v in zip(results, values)])
    return score, results


def sample_pairs(actor: Actor, critic: Critic | None, rewards: Rewards, starts: Sequence[Sequence[int]],
                 gamma: float, episode_offset: int = 0, samples: int = 2, progress_bonus: float = 0.0,
                 candidates: Sequence[Sequence[int]] | None = None) -> tuple[list[dict[str, str]], Episodes]:
    """Preference pairs {prompt, chosen, rejected} (best vs worst of ``samples`` move lists per start state, scored by
    :func:`score_move_lists`; with ``candidates`` the chosen list is the best of those instead) and the sampled
    one-turn episodes (stream = sample index); a state whose worst sample scores as well as the chosen gives no pair."""
    if samples < 2:
        raise ValueError(f"samples must be at least 2, got {samples}")
    prompts = [rewards.prompt(s) for s in starts]
    S = len(starts)
    acted = actor.act(prompts * samples)  # (samples*S) one batched call: sample j of state i at row j*S + i
    score, results = score_move_lists(critic, rewards, [starts[i % S] for i in range(samples * S)], acted.actions,
                                      gamma, progress_bonus)  # (samples*S,)
    best_text, best_score = None, None
    if candidates is not None:
        C = len(candidates)
        cand_score, _ = score_move_lists(critic, rewards, [s for s in starts for _ in range(C)],
                                         [m for _ in starts for m in candidates], gamma, progress_bonus)
        top = cand_score.reshape(S, C).argmax(1)  # (S,) first of equals: the shortest, candidates are by length
        best_text = [moves_text(candidates[c]) for c in top]
        best_score = cand_score.reshape(S, C).max(1)  # (S,)
    ep = Episodes()
    for i in range(samples * S):
        _, r, succ, off = results[i]
        for key, value in (("stream", i // S), ("episode", episode_offset + i % S), ("step", 0),
                           ("state", prompts[i % S]), ("action", acted.texts[i]), ("logprob", acted.logprobs[i]),
                           ("reward", r), ("terminated", succ or off), ("truncated", not (succ or off)),
                           ("success", succ), ("off_map", off), ("config", tuple(starts[i % S]))):
            ep.rows[key].append(value)
        ep.outcomes.append((succ, off))
    pairs = []
    for i in range(S):
        rows = [j * S + i for j in range(samples)]
        best = max(rows, key=lambda j: score[j])  # first of equals: the earliest sample
        worst = min(rows, key=lambda j: score[j])
        chosen, top = (acted.texts[best], score[best]) if best_text is None else (best_text[i], best_score[i])
        if chosen == acted.texts[worst] or top - score[worst] < 1e-6:
            continue  # no preference
        pairs.append({"prompt": prompts[i], "chosen": chosen, "rejected": acted.texts[worst]})
    return pairs, ep


def make_optimizer(model: Any, lr: float) -> Any:
    """The actor's AdamW over its trainable (LoRA) weights, kept across SimPO iterations (and checkpointed), so
    each iteration continues the same optimisation instead of restarting Adam's moments."""
    import torch

    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)


def train_simpo(model: Any, tokenizer: Any, pairs: list[dict[str, str]], out_dir: str, beta: float, gamma: float,
                lr: float, epochs: int, batch: int, seed: int, progress: bool,
                optimizer: Any = None, nll: float = 0.0) -> dict[str, float]:
    """One SimPO pass over ``pairs`` with trl's CPOTrainer on the (peft) model, in place; returns its last logs.
    ``optimizer`` (:func:`make_optimizer`) carries Adam's state across iterations at a constant learning rate."""
    import torch
    from datasets import Dataset
    from trl.experimental.cpo import CPOConfig, CPOTrainer

    from ad.progress.hf import trainer_progress

    disable_tqdm, progress_callbacks = trainer_progress(progress, "SimPO (trl)")  # plain lines in a log
    args = CPOConfig(output_dir=out_dir, loss_type="simpo", cpo_alpha=nll, simpo_gamma=gamma, beta=beta,
                     learning_rate=lr, num_train_epochs=epochs, per_device_train_batch_size=batch,
                     gradient_accumulation_steps=1, max_length=512, logging_steps=1, save_strategy="no",
                     report_to="none", use_cpu=True, bf16=False, seed=seed, disable_tqdm=disable_tqdm,
                     dataloader_num_workers=0, remove_unused_columns=False, lr_scheduler_type="constant",
                     activation_checkpointing=False)  # checkpointing only re-runs forwards here (no memory limit)
    optimizers = (optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)) if optimizer else (None, None)
    trainer = CPOTrainer(model=model, args=args, processing_class=tokenizer, train_dataset=Dataset.from_list(pairs),
                         optimizers=optimizers, callbacks=progress_callbacks)
    result = trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    return {"loss": float(result.training_loss), **({k: float(v) for k, v in logs[-1].items()
                                                      if isinstance(v, (int, float))} if logs else {})}
