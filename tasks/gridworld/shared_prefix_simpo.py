"""SimPO (and CPO-SimPO) on preference pairs whose prompts share an opening, with that opening run once per batch.

Every grid-world prompt starts with the same strategy + info text (~3/4 of its tokens). trl's CPOTrainer runs each
of the 2B sequences of a batch (B chosen, B rejected) from its first token; here the shared opening goes through the
model once (with gradients), its keys/values are repeated for the 2B rows, and only each row's own tail (state
text + completion) is computed per row. Same loss as trl's ``CPOTrainer(loss_type="simpo", cpo_alpha=nll)``:

    logp(y) = mean over the completion's tokens of log p(token)          (length-normalised, full vocabulary)
    loss    = -logsigmoid(beta * (logp(chosen) - logp(rejected)) - gamma) + nll * NLL(chosen tokens)

with two differences from the trl path, both towards the actor: completions are the actor's own token ids (the
move list's tokens + EOS, as :class:`tasks.gridworld.actor.MoveTrie` decodes them) and prompts are tokenized as the
actor tokenizes them (trl prepends a BOS token the actor never sees). The LM head runs only at the positions that
predict completion tokens (in float32 whatever the weights' dtype).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ad.lm.scoring import base_model, shared_prefix_length
from tasks.gridworld.actor import completion_ids


def _body_and_head(model: Any) -> tuple[Any, Any]:
    """The decoder stack and the LM head of a causal LM (through a peft wrapper: LoRA layers stay in place)."""
    base = base_model(model)
    return getattr(base, base.base_model_prefix), base.get_output_embeddings()


def sequence_logps(model: Any, prompt_ids: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                   pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of N completions after their prompts, the prompts' shared opening run once:
    ``(token_logps, row)``, (M,) log p of every completion token (full vocabulary) and (M,) the row each belongs to
    (M = total completion tokens). Differentiable w.r.t. the model's trainable weights."""
    from transformers import DynamicCache

    N = len(prompt_ids)
    shared = shared_prefix_length(prompt_ids) if N > 1 else len(prompt_ids[0]) - 1  # leaves every row >= 1 token
    body, head = _body_and_head(model)
    device = next(model.parameters()).device
    cache = DynamicCache()
    if shared:
        prefix = torch.as_tensor(list(prompt_ids[0][:shared]), dtype=torch.long, device=device)[None]  # (1, P)
        body(input_ids=prefix, cache=cache, use_cache=True)
        cache.batch_repeat_interleave(N)  # (1, ...) -> (N, ...) keys/values of the shared opening, gradients kept
    rows = [list(p[shared:]) + list(c) for p, c in zip(prompt_ids, completions)]
    T = max(len(r) for r in rows)
    ids = torch.full((N, T), pad_id, dtype=torch.long)  # (N, T) right-padded: positions stay contiguous
    mask = torch.zeros((N, T), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.as_tensor(r, dtype=torch.long)
        mask[i, :len(r)] = 1
    attention = torch.cat([torch.ones((N, shared), dtype=torch.long), mask], 1)  # (N, P + T)
    positions = (shared + torch.arange(T))[None].expand(N, T)  # (N, T)
    hidden = body(input_ids=ids.to(device), attention_mask=attention.to(device), position_ids=positions.to(device),
                  cache=cache, use_cache=True).last_hidden_state  # (N, T, H)
    # completion token j of row i sits at column t_i + j and is predicted by the hidden state one column earlier
    row_index, col_index, targets = [], [], []
    for i, (p, c) in enumerate(zip(prompt_ids, completions)):
        tail = len(p) - shared
        row_index += [i] * len(c)
        col_index += list(range(tail - 1, tail - 1 + len(c)))
        targets += list(c)
    row = torch.as_tensor(row_index, device=device)  # (M,)
    picked = hidden[row, torch.as_tensor(col_index, device=device)]  # (M, H)
    logits = F.linear(picked.float(), head.weight.float(), None if head.bias is None else head.bias.float())  # (M, V)
    token_logps = torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(targets, device=device)[:, None])[:, 0]
    return token_logps, row  # (M,), (M,)


def simpo_loss(model: Any, tokenizer: Any, pairs: Sequence[dict[str, str]], beta: float, gamma: float,
               nll: float = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean SimPO (+ ``nll`` x NLL) loss of a batch of {prompt, chosen, rejected} pairs, and trl-style metrics."""
    B = len(pairs)
    prompts = [tokenizer(p["prompt"])["input_ids"] for p in pairs]
    completions = [completion_ids(tokenizer, p["chosen"]) for p in pairs] + [
        completion_ids(tokenizer, p["rejected"]) for p in pairs]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    token_logps, row = sequence_logps(model, prompts + prompts, completions, pad)  # rows: B chosen, B rejected
    sums = torch.zeros(2 * B, device=token_logps.device).index_add(0, row, token_logps)  # (2B,)
    counts = torch.bincount(row, minlength=2 * B).float()  # (2B,)
    avg = sums / counts  # (2B,) length-normalised log-probabilities
    chosen, rejected = avg[:B], avg[B:]  # (B,), (B,)
    losses = -F.logsigmoid(beta * (chosen - rejected) - gamma)  # (B,) = trl: beta * (logits - gamma / beta)
    nll_loss = -sums[:B].sum() / counts[:B].sum()  # trl: cross-entropy averaged over the chosen tokens
    loss = losses.mean() + nll * nll_loss
    with torch.no_grad():
        metrics = {"loss": float(loss), "nll_loss": float(nll_loss), "logps/chosen": float(chosen.mean()),
                   "logps/rejected": float(rejected.mean()),
                   "rewards/margins": float(beta * (chosen - rejected).mean()),
                   "rewards/accuracies": float((chosen > rejected).float().mean())}
    return loss, metrics


def train_shared_prefix_simpo(model: Any, tokenizer: Any, pairs: list[dict[str, str]], optimizer: Any, beta: float,
                              gamma: float, epochs: int, batch: int, seed: int, nll: float = 0.0,
                              progress: bool = False) -> dict[str, float]:
    """``epochs`` shuffled passes over ``pairs`` in batches of ``batch``, one optimiser step per batch (in place);
    returns the mean loss and the last step's metrics."""
    rng = np.random.default_rng(seed)
    was_training = model.training
    model.train()
    steps = [(e, order[i:i + batch]) for e in range(epochs) for order in [rng.permutation(len(pairs))]
             for i in range(0, len(pairs), batch)]
    if progress:
        from ad.progress import track

        steps = track(steps, "SimPO", unit="step")
    losses, metrics = [], {}
    for _, idx in steps:
        loss, metrics = simpo_loss(model, tokenizer, [pairs[i] for i in idx], beta, gamma, nll)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(metrics["loss"])
    model.train(was_training)
    return {**metrics, "loss": float(np.mean(losses)) if losses else float("nan"), "steps": float(len(losses))}
