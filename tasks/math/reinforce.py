"""The batched engine of ``ad generate math`` (``--engine fast``, the ``cpu`` preset): trl's RLOO recipe written
out, with each phase done once and no second model.

One iteration (= one optimiser step, as in the trl run):

1. **sampling**: ``num_generations`` solutions of each of ``problems_per_step`` problems with
   :func:`tasks.lm_sampling.sample_groups` (each prompt read once per group, finished rows leave the batch); the
   behaviour log-probabilities come out of the sampler (log-softmax of logits / temperature, as trl scores them);
2. **reference**: the per-token log-probabilities of the same tokens under the reference policy: the base model
   with the adapter off (``peft``'s ``disable_adapter()``) while the reference was never refreshed, else the LoRA
   weights saved at the last refresh swapped in for the pass. Skipped when the reference *is* the policy (right
   after a refresh, and at the first iteration): the KL is then exactly 0;
3. **update**: reward = correctness (+ format reward) - beta x sum over tokens of (behaviour - reference logprob);
   advantage = reward - the mean reward of the other solutions of its group (leave-one-out); loss = - mean over
   solutions of advantage x the sum of the solution's token log-probabilities (trl's clipped ratio is 1 on policy,
   so its gradient is this one); one problem's group per backward pass (its prompt run once, its keys / values
   repeated for the group); AdamW with trl's defaults (linear decay to 0, gradient norm clipped at 1);
4. **logging**: every solution is a history row (:class:`tasks.math.rollouts.MathRolloutLog`).

Every ``chunk_steps`` iterations the adapter, the optimiser, the schedule and the reference adapter are saved as
``checkpoint-<step>``, then the chunk's rows are committed (the resume rule of the trl engine). Problem order and
sampling draws depend only on (seed, iteration), so a resumed run samples what the uninterrupted run would have.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import time
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from tasks.lm_sampling import sample_groups
from tasks.math.answers import format_number, score
from tasks.math.config import GenerateConfig
from tasks.math.problems import Problem
from tasks.math.prompts import render_prompt

#: Seconds per phase of one iteration (the keys of :attr:`Reinforce.timings`).
PHASES = ("sampling", "reference", "update", "logging")
STATE_FILE = "engine_state.pt"


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every token that ends a solution: the tokenizer's EOS and the model's generation-config EOS token(s)."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    config = getattr(model, "generation_config", None)
    extra = getattr(config, "eos_token_id", None) if config is not None else None
    ids |= set(extra if isinstance(extra, (list, tuple)) else [extra] if extra is not None else [])
    return {int(i) for i in ids}


def iteration_problems(n: int, per_step: int, seed: int, iteration: int) -> list[int]:
    """Indices of the training problems of ``iteration``: consecutive slices of one seeded permutation of the
    ``n`` problems per epoch (the same for a resumed run)."""
    out: list[int] = []
    for flat in range(iteration * per_step, (iteration + 1) * per_step):
        epoch, place = divmod(flat, n)
        order = np.random.default_rng([seed, epoch]).permutation(n)
        out.append(int(order[place]))
    return out


def leave_one_out(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """(N,) advantages: each reward minus the mean of the other ``group - 1`` rewards of its group."""
    grouped = rewards.view(-1, group)  # (P, G)
    baseline = (grouped.sum(1, keepdim=True) - grouped) / (group - 1)
    return (grouped - baseline).reshape(-1)


def group_logps(model: Any, prompt: Sequence[int], completions: Sequence[Sequence[int]], temperature: float,
                pad_id: int) -> list[torch.Tensor]:
    """Per-token log-probabilities (log-softmax of logits / temperature) of each completion of one prompt; the
    prompt runs once and its keys / values are repeated for the completions. Differentiable when grad is on."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    g, width = len(completions), max(len(c) for c in completions)
    cache = DynamicCache()
    head = model(input_ids=torch.tensor([list(prompt)], device=device), cache=cache, use_cache=True,
                 logits_to_keep=1)
    first = head.logits[:, -1:].float().expand(g, 1, -1)  # (G, 1, V) predicts each completion's first token
    cache.batch_repeat_interleave(g)
    ids = torch.full((g, width), pad_id, dtype=torch.long, device=device)  # (G, C) right-padded
    mask = torch.zeros((g, len(prompt) + width), dtype=torch.long, device=device)  # (G, L + C)
    mask[:, :len(prompt)] = 1
    for i, c in enumerate(completions):
        ids[i, :len(c)] = torch.as_tensor(list(c), dtype=torch.long)
        mask[i, len(prompt):len(prompt) + len(c)] = 1
    positions = torch.arange(len(prompt), len(prompt) + width, device=device).expand(g, -1)  # (G, C)
    body = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True)
    logits = torch.cat([first, body.logits[:, :-1].float()], 1) / temperature  # (G, C, V) predicting ids
    logps = logits.log_softmax(-1).gather(2, ids[:, :, None])[:, :, 0]  # (G, C)
    return [logps[i, :len(c)] for i, c in enumerate(completions)]


class Reinforce:
    """REINFORCE with a leave-one-out baseline and a KL penalty to a (refreshed) reference, on a LoRA policy.

    ``model``: the base causal LM (any dtype: the adapter is float32); ``log_batch(update, columns)``: called with
    every iteration's solutions (:meth:`tasks.math.rollouts.MathRolloutLog.add`)."""

    def __init__(self, cfg: GenerateConfig, model: Any, tokenizer: Any, problems: list[Problem],
                 shots: list[Problem], log_batch: Callable[[int, dict[str, Any]], None]) -> None:
        from peft import get_peft_model

        from ad.config.groups import peft_lora_config

        self.cfg, self.tokenizer, self.problems, self.log_batch = cfg, tokenizer, problems, log_batch
        torch.manual_seed(cfg.seed)  # the adapter's random initialisation: one per seed
        self.policy = get_peft_model(model, peft_lora_config(cfg.lora_dict()))  # adapters float32 (peft's default)
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.learning_rate, weight_decay=0.0)
        total = cfg.max_steps
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: max(0.0, (total - s) / total))
        self.prompts = [tokenizer(render_prompt(tokenizer, p.question, shots))["input_ids"] for p in problems]
        self.texts = [render_prompt(tokenizer, p.question, shots) for p in problems]
        self.eos = eos_ids(self.policy, tokenizer)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.ref_state: dict[str, torch.Tensor] | None = None  # saved adapter (None: the base model is the ref)
        self.ref_is_policy = True  # LoRA starts as a no-op: the policy is the base model
        self.step = 0
        self.timings: dict[str, list[float]] = {k: [] for k in PHASES}

    # -- the reference ---------------------------------------------------------------------------------------------
    def _adapter(self) -> dict[str, torch.Tensor]:
        return {n: p for n, p in self.policy.named_parameters() if p.requires_grad}

    def refresh(self) -> None:
        """Reference := the current policy (a copy of the adapter, not of the model)."""
        self.ref_state = {n: p.detach().clone() for n, p in self._adapter().items()}
        self.ref_is_policy = True

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        """The policy module acting as the reference inside the block."""
        if self.ref_state is None:
            with self.policy.disable_adapter():
                yield
            return
        adapter = self._adapter()
        kept = {n: p.detach().clone() for n, p in adapter.items()}
        with torch.no_grad():
            for n, p in adapter.items():
                p.copy_(self.ref_state[n])
        try:
            yield
        finally:
            with torch.no_grad():
                for n, p in adapter.items():
                    p.copy_(kept[n])

    # -- one iteration ---------------------------------------------------------------------------------------------
    def iteration(self) -> dict[str, float]:
        """Sample, score, update and log one iteration; returns its mean reward, KL and phase seconds."""
        cfg, G, t = self.cfg, self.cfg.num_generations, self.step
        chosen = iteration_problems(len(self.problems), cfg.problems_per_step, cfg.seed, t)
        clock = time.perf_counter()
        device = next(self.policy.parameters()).device
        generator = torch.Generator(device=device).manual_seed(cfg.seed * 1_000_003 + t)
        samples = sample_groups(self.policy, [self.prompts[i] for i in chosen], G, cfg.max_new_tokens,
                                eos_ids=self.eos, pad_id=self.pad, temperature=cfg.temperature, generator=generator)
        seconds = {"sampling": time.perf_counter() - clock}

        clock = time.perf_counter()
        behaviour = samples.logprobs
        if cfg.beta > 0 and not self.ref_is_policy:
            self.policy.eval()
            with torch.no_grad(), self.reference():
                ref = [lp.cpu() for k, i in enumerate(chosen)
                       for lp in group_logps(self.policy, self.prompts[i], samples.tokens[k * G:(k + 1) * G],
                                             cfg.temperature, self.pad)]
        else:
            ref = behaviour
        kl = torch.tensor([float((b - r).sum()) for b, r in zip(behaviour, ref)])  # (N,)
        seconds["reference"] = time.perf_counter() - clock

        clock = time.perf_counter()
        texts = self.tokenizer.batch_decode(samples.tokens, skip_special_tokens=True)
        answers = [self.problems[i].answer for i in chosen for _ in range(G)]
        rewards = [score(text, Fraction(a), cfg.format_reward) for text, a in zip(texts, answers)]
        advantages = leave_one_out(torch.tensor(rewards) - cfg.beta * kl, G)  # (N,)
        self.policy.train()
        n = len(samples.tokens)
        for k, i in enumerate(chosen):  # one group per backward pass
            rows = slice(k * G, (k + 1) * G)
            if not bool(advantages[rows].abs().gt(0).any()):
                continue  # a group whose solutions all scored the same moves nothing
            logps = group_logps(self.policy, self.prompts[i], samples.tokens[rows], cfg.temperature, self.pad)
            sums = torch.stack([lp.sum() for lp in logps])  # (G,)
            loss = -(advantages[rows].to(sums.device) * sums).sum() / n
            loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.ref_is_policy = False
        seconds["update"] = time.perf_counter() - clock

        clock = time.perf_counter()
        self.log_batch(t, {
            "prompts": [self.texts[i] for i in chosen for _ in range(G)], "completions": texts,
            "completion_ids": samples.tokens, "rewards": rewards,
            "logprobs": [lp.numpy().astype(np.float32) for lp in behaviour], "kl": kl.tolist(),
            "question": [self.problems[i].question for i in chosen for _ in range(G)],
            "problem_id": [self.problems[i].id for i in chosen for _ in range(G)],
            "answer": [format_number(a) for a in answers]})
        self.step += 1
        if cfg.refresh_every and self.step % cfg.refresh_every == 0:
            self.refresh()
        seconds["logging"] = time.perf_counter() - clock
        for key, value in seconds.items():
            self.timings[key].append(value)
        return {"reward": float(np.mean(rewards)), "kl": float(kl.mean()), **seconds}

    # -- checkpoints -----------------------------------------------------------------------------------------------
    def save(self, folder: Path) -> None:
        """Write ``folder`` (adapter as ``save_pretrained`` writes it, plus optimiser / schedule / reference state)
        completely or not at all."""
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        self.policy.save_pretrained(tmp)
        torch.save({"step": self.step, "optimizer": self.optimizer.state_dict(),
                    "schedule": self.schedule.state_dict(), "ref_state": self.ref_state,
                    "ref_is_policy": self.ref_is_policy}, tmp / STATE_FILE)
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)

    def load(self, folder: Path) -> None:
        """Continue from a checkpoint written by :meth:`save`."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(self.policy, load_file(str(folder / "adapter_model.safetensors")))
        state = torch.load(folder / STATE_FILE, weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.ref_state, self.ref_is_policy, self.step = state["ref_state"], state["ref_is_policy"], state["step"]


def train(cfg: GenerateConfig, model: Any, tokenizer: Any, problems: list[Problem], shots: list[Problem], log: Any,
          ckpt_dir: Path, resume: str | None, on_commit: Callable[[int, int], None]) -> tuple[Any, dict[str, Any]]:
    """Run (or resume) the iterations of ``cfg``; commits a unit every ``chunk_steps`` iterations after saving
    its checkpoint. Returns (the trained policy, per-phase seconds of the iterations run now)."""
    from ad.progress import Progress

    engine = Reinforce(cfg, model, tokenizer, problems, shots, log.add)
    if resume is not None:
        engine.load(Path(resume))
    with Progress(cfg.max_steps, desc="REINFORCE", unit="it", initial=engine.step, show=cfg.progress) as bar:
        while engine.step < cfg.max_steps:
            stats = engine.iteration()
            clock = time.perf_counter()
            if engine.step % cfg.chunk_steps == 0 or engine.step == cfg.max_steps:
                chunk = (engine.step - 1) // cfg.chunk_steps
                engine.save(ckpt_dir / f"checkpoint-{engine.step}")
                rows = log.commit(chunk, {"updates": [chunk * cfg.chunk_steps, engine.step],
                                          "checkpoint": f"checkpoint-{engine.step}"})
                on_commit(chunk, rows)
            engine.timings["logging"][-1] += time.perf_counter() - clock
            bar.update(1, reward=f"{stats['reward']:.3f}", kl=f"{stats['kl']:.3f}")
    engine.policy.eval()
    return engine.policy, engine.timings
