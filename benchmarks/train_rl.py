"""AD transformer training throughput: ours vs the common re-implementation, side by side in one process.

The reference is what public AD re-implementations do: a ``transformers.GPT2Model`` fed ``inputs_embeds``
of interleaved state / action / reward tokens (3 per transition, plus a time-step embedding and a LayerNorm,
as in Decision Transformer), an action head on the state tokens, ``torch.optim.AdamW`` with default
settings. Ours is ``models.rl.ADTransformer`` (one token per transition by default, SDPA, fused AdamW).
Same width, depth, heads, feed-forward width, context (in transitions), batch, data (synthetic in-context
windows, ``benchmarks.helpers.synthetic_goals``), learning rate and gradient clipping; both train the action loss only.
Timing alternates short chunks of steps between the models so machine noise hits all of them alike.

Figures: transitions/s (ours in both layouts vs reference), action NLL on fresh windows after the same
number of training transitions, and optimiser steps/s of the whole `ad train rl` (Lightning + data loader)
next to a plain PyTorch loop with the same model.

    python benchmarks/train_rl.py            # demo and large preset sizes, more steps (~10 min on 1 thread)
    python benchmarks/train_rl.py --quick    # demo size only, under a minute
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="demo size only, few steps (under a minute)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from ad.config import make_config  # noqa: E402
from models.rl.config import TrainRLConfig, model_config_of  # noqa: E402
from models.rl.model import ADTransformer  # noqa: E402
from models.training import fast_adamw_kwargs  # noqa: E402
from benchmarks.helpers.trainee import Trainee  # noqa: E402
from benchmarks.helpers.synthetic_goals import synthetic_batches, write_synthetic_dataset  # noqa: E402


NUM_STATES, NUM_ACTIONS, EPISODE_LENGTH = 81, 5, 20  # DarkRoom 9x9 sizes


class GPT2AD(nn.Module):
    """The common re-implementation: interleaved (s, a, r) tokens through transformers.GPT2Model."""

    def __init__(self, cfg):
        super().__init__()
        from transformers import GPT2Config, GPT2Model

        C = cfg.n_embd
        self.gpt = GPT2Model(GPT2Config(vocab_size=1, n_positions=3 * cfg.context, n_embd=C, n_layer=cfg.n_layer,
                                        n_head=cfg.n_head, n_inner=cfg.n_ff, resid_pdrop=cfg.resid_dropout,
                                        embd_pdrop=cfg.embd_dropout, attn_pdrop=cfg.attn_dropout,
                                        bos_token_id=None, eos_token_id=None))
        self.embed_state = nn.Embedding(cfg.num_states, C)
        self.embed_action = nn.Embedding(cfg.num_actions, C)
        self.embed_reward = nn.Linear(1, C)
        self.embed_time = nn.Embedding(cfg.episode_length, C)
        self.embed_ln = nn.LayerNorm(C)
        self.predict_action = nn.Linear(C, cfg.num_actions)

    def compute_loss(self, batch):
        states, actions, rewards, timesteps = batch["states"], batch["actions"], batch["rewards"], batch["timesteps"]
        B, T = actions.shape
        t = self.embed_time(timesteps)  # (B, T, C)
        x = torch.stack([self.embed_state(states) + t, self.embed_action(actions) + t,
                         self.embed_reward(rewards.unsqueeze(-1)) + t], dim=2).reshape(B, 3 * T, -1)  # (B, 3T, C)
        h = self.gpt(inputs_embeds=self.embed_ln(x)).last_hidden_state  # (B, 3T, C)
        logits = self.predict_action(h.view(B, T, 3, -1)[:, :, 0])  # (B, T, A)
        loss = F.cross_entropy(logits.flatten(0, 1), actions.flatten())
        return loss, {"action_nll": loss.detach()}


def model_config(preset: str, **overrides):
    cfg = make_config(TrainRLConfig, {"preset": preset, **overrides})
    model = model_config_of(cfg, num_states=NUM_STATES, num_actions=NUM_ACTIONS, episode_length=EPISODE_LENGTH,
                            state_weight=0.0, reward_weight=0.0, logprob_weight=0.0)  # action loss, as the reference
    return cfg, model


def compare(preset: str, steps: int, chunk: int, pool: int, eval_batches: int = 4) -> list[dict]:
    """Train ours (both layouts) and the reference on the same batches; returns the figures."""
    cfg, transition = model_config(preset, layout="transition")
    _, separate = model_config(preset, layout="separate")
    B, T = cfg.batch_size, cfg.context
    batches = synthetic_batches(pool, B, T, NUM_STATES, NUM_ACTIONS, EPISODE_LENGTH, seed=0)
    held_out = synthetic_batches(eval_batches, B, T, NUM_STATES, NUM_ACTIONS, EPISODE_LENGTH, seed=1)
    betas = (cfg.beta1, cfg.beta2)
    trainees = []
    for name, mcfg in (("ours", transition), ("ours-separate", separate)):
        torch.manual_seed(0)
        m = ADTransformer(mcfg)
        trainees.append(Trainee(name, m, torch.optim.AdamW(m.parameters(), lr=cfg.learning_rate, betas=betas,
                                                           **fast_adamw_kwargs()), cfg.grad_clip))
    torch.manual_seed(0)
    ref = GPT2AD(transition)
    trainees.append(Trainee("reference", ref, torch.optim.AdamW(ref.parameters(), lr=cfg.learning_rate, betas=betas),
                            cfg.grad_clip))
    for t in trainees:  # warm-up (allocator, kernels) outside the timing and the step count
        t.run(batches[:2])
        t.reset_clock()
    done = 2
    while done < steps:
        n = min(chunk, steps - done)
        chunk_batches = [batches[(done + i) % pool] for i in range(n)]
        for t in trainees:
            t.run(chunk_batches)
        done += n
        print(f"  {preset}: {done}/{steps} steps  " + "  ".join(
            f"{t.name} {t.steps * B * T / max(t.seconds, 1e-9):,.0f} tr/s" for t in trainees), flush=True)
    ours, sep, reference = trainees
    rate = {t.name: t.steps * B * T / t.seconds for t in trainees}
    nll = {t.name: t.nll(held_out) for t in trainees}
    shape = f"{preset}: {cfg.n_layer}x{cfg.n_embd}, ff {cfg.n_ff}, {T} transitions, batch {B}"
    return [
        figure(f"train throughput, {shape} (ours 1 token/transition)", "transitions/s", rate["ours"],
               rate["reference"], ">= 2x reference"),
        figure(f"train throughput, {shape} (ours separate s/a/r tokens, same tokens as reference)", "transitions/s",
               rate["ours-separate"], rate["reference"], ">= 1x reference"),
        figure(f"action NLL on fresh windows after {steps * B * T:,} transitions, {shape}", "nats", nll["ours"],
               nll["reference"], "<= reference", higher_is_better=False),
    ]


def lightning_steps(steps: int, threads: int) -> list[dict]:
    """Optimiser steps/s of `ad train rl --preset demo` (Lightning + data loader) vs a plain loop, same model.

    The plain loop runs half its steps before and half after the Lightning run, to share the machine's noise.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from models.rl.train import train

    with tempfile.TemporaryDirectory() as tmp:
        data = write_synthetic_dataset(Path(tmp) / "data", num_tasks=5, streams=4, length=2000,
                                       num_states=NUM_STATES, num_actions=NUM_ACTIONS, episode_length=EPISODE_LENGTH)
        cfg = make_config(TrainRLConfig, {"preset": "demo", "data": str(data), "out": str(Path(tmp) / "run"),
                                          "max_steps": steps, "val_every": 0, "log_every": 10, "progress": False,
                                          "checkpoint_every": 10 * steps, "threads": threads})
        mcfg = model_config_of(cfg, num_states=NUM_STATES, num_actions=NUM_ACTIONS, episode_length=EPISODE_LENGTH)
        torch.manual_seed(0)
        model = ADTransformer(mcfg)
        plain = Trainee("plain", model,
                        torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, **fast_adamw_kwargs()),
                        cfg.grad_clip)
        batches = synthetic_batches(8, cfg.batch_size, cfg.context, NUM_STATES, NUM_ACTIONS, EPISODE_LENGTH)
        plain.run(batches[:2])
        plain.reset_clock()
        plain.run([batches[i % 8] for i in range(steps // 2)])
        train(cfg)
        plain.run([batches[i % 8] for i in range(steps // 2)])
        events = EventAccumulator(str(Path(tmp) / "run" / "tb"))
        events.Reload()
        scalars = events.Scalars("train/loss")  # logged every 10 steps with wall-clock times
        lit_rate = (scalars[-1].step - scalars[1].step) / (scalars[-1].wall_time - scalars[1].wall_time)
    return [figure("optimiser steps/s, demo preset, whole `ad train rl` (Lightning + loader) vs plain loop",
                   "steps/s", lit_rate, plain.steps / plain.seconds, ">= 0.8x plain loop")]


def main(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} threads")
    figures = compare("demo", steps=32 if args.quick else 300, chunk=10 if args.quick else 25,
                      pool=32 if args.quick else 300)  # fresh windows every step: no memorising a small pool
    figures += lightning_steps(steps=60 if args.quick else 300, threads=threads)
    if not args.quick:  # large preset size: the reference takes ~20 s per step on one CPU thread
        figures += compare("large", steps=6, chunk=2, pool=6, eval_batches=1)
    report("train_rl", figures, args.quick, page="models-and-evaluation")


if __name__ == "__main__":
    main(ARGS)
