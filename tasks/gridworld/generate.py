"""``ad generate gridworld``: evaluate the prompted actor, collect episodes for a Monte-Carlo critic (actor
frozen), train the actor with SimPO, evaluate again. Every episode of every phase is logged.

Units (run = seed), each committed only after what it depends on is saved: ``eval-before`` / ``eval-after``
(greedy, held-out configurations), ``critic-bNNNN`` (the frozen base actor's episodes, whose returns fit the
critic), ``simpo-iNNNN`` (an iteration's episodes and pairs, after its adapter is saved); a re-run resumes after
the last committed unit. The run folder (``--run-dir``, else ``<out>/_run`` for a local ``--out``) holds the
checkpoints, TensorBoard scalars, rates.png and summary.json.
"""
from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

from ad.files import run_folder, write_json_atomic
from ad.config import data_options
from ad.errors import UserError
from ad.history import HistoryReader, HistoryWriter, Location
from ad.lm.pretrained import load_base
from tasks.gridworld.actor import LMActor, all_move_lists
from tasks.gridworld.config import GenerateConfig
from tasks.gridworld.critic import LMCritic, LMFeatures, fit_critic
from tasks.gridworld.env import MOVES, split_configs
from tasks.gridworld.prompts import STRATEGY
from tasks.gridworld.rollouts import SPEC, Rewards, commit_episodes, concat, run_episodes
from tasks.gridworld.shared_prefix_simpo import train_shared_prefix_simpo
from tasks.gridworld.simpo import make_optimizer, sample_pairs, train_simpo

#: Adam state of the actor, saved beside each SimPO iteration's adapter (a resumed run continues it).
OPTIMIZER_FILE = "optimizer.pt"


def dataset_metadata(cfg: GenerateConfig, train: list, heldout: list) -> dict[str, Any]:
    """Dataset-level metadata: task spec, source algorithm + config, seeds, split of configurations."""
    return {
        "task_spec": {"kind": "llm-gridworld", "size": cfg.size, "moves": list(MOVES), "max_moves": cfg.max_moves,
                      "max_turns": cfg.max_turns, "clip_at_wall": cfg.clip_at_wall, "strategy": STRATEGY,
                      "state_text": cfg.state_text,
                      "config": "(x, y, orientation, goal_x, goal_y); orientation 0 north (+y) 1 east 2 south 3 west"},
        "source": {"algorithm": "MC critic + SimPO", "config": data_options(cfg)},
        "seeds": [cfg.seed],
        "split": {"train": ["critic", "simpo"], "heldout": ["eval-before", "eval-after"]},
        "configs": {"train": [list(c) for c in train], "heldout": [list(c) for c in heldout]},
        "tasks": {},
    }


def _draw(configs: list, n: int, *seed: int) -> list:
    rng = np.random.default_rng(list(seed))
    return [configs[i] for i in rng.integers(0, len(configs), n)]


class _Board:
    """TensorBoard scalars (or nothing)."""

    def __init__(self, folder: Path | None):
        self.tb = None
        if folder is not None:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(folder))

    def add(self, step: int, **scalars: float) -> None:
        if self.tb is not None:
            for k, v in scalars.items():
                self.tb.add_scalar(k, v, step)
            self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def _progress(items: range, label: str, show: bool) -> Iterable[int]:
    """``items`` with the toolkit's progress display (:func:`ad.progress.track`) when ``show``."""
    from ad.progress import track

    return track(items, label) if show else items


def generate(cfg: GenerateConfig) -> dict[str, Any]:
    """Run (or resume) ``cfg``; returns the summary also written to ``<run folder>/summary.json``."""
    from ad.progress.hf import library_bars_off_in_logs

    library_bars_off_in_logs()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    train, heldout = split_configs(cfg.size, cfg.heldout_fraction, cfg.seed)
    model, tokenizer = load_base(cfg.model, cfg.dtype)
    location = Location.of(cfg.out)
    writer = HistoryWriter(location, spec=SPEC, family="gridworld", metadata=dataset_metadata(cfg, train, heldout))
    local = location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    run_dir, run = run_folder(cfg.out, location, cfg.run_dir), cfg.seed
    ckpt = run_dir / "checkpoints"
    done = {task for task, r in writer.completed_units() if r == run}
    if not done:  # a fresh start: nothing in the run folder belongs to it (a remote dataset's run folder outlives it)
        shutil.rmtree(ckpt, ignore_errors=True)
    summary_path = run_dir / "summary.json"
    summary: dict[str, Any] = json.loads(summary_path.read_text()) if summary_path.is_file() and done else {}
    board = _Board(run_dir / "tb" if cfg.tensorboard else None)
    rewards = Rewards(cfg.size, cfg.clip_at_wall, cfg.goal_reward, cfg.move_cost, cfg.offmap_penalty, cfg.state_text)
    actor = LMActor(model, tokenizer, cfg.max_moves, cfg.temperature, torch.Generator().manual_seed(cfg.seed))
    eval_starts = _draw(heldout, cfg.eval_episodes, cfg.seed, 0) if cfg.eval_episodes else []
    start = time.perf_counter()

    def evaluate(task: str, update: int) -> None:
        if not eval_starts or task in done:
            return
        ep = run_episodes(actor, rewards, eval_starts, cfg.max_turns, greedy=True, batch=cfg.num_envs)
        commit_episodes(writer, task, run, ep, "eval", update, cfg.gamma, {"phase": "eval"})
        summary[task] = {"success_rate": ep.success_rate(), "offmap_rate": ep.offmap_rate(),
                         "episodes": len(eval_starts)}
        board.add(update, **{f"{task}/success_rate": ep.success_rate(), f"{task}/offmap_rate": ep.offmap_rate()})
        write_json_atomic(summary_path, summary)
        print(f"{task}: success {ep.success_rate():.3f}, off-map {ep.offmap_rate():.3f} ({len(eval_starts)} held-out "
              "episodes, greedy)", flush=True)

    evaluate("eval-before", 0)
    critic, critic_file = None, ckpt / "critic.pt"
    if "critic" in cfg.phase_list:
        batches = math.ceil(cfg.critic_episodes / cfg.num_envs)
        for k in _progress(range(batches), "critic episodes", cfg.progress):
            task = f"critic-b{k:04d}"
            if task in done:
                continue
            ep = run_episodes(actor, rewards, _draw(train, cfg.num_envs, cfg.seed, 1, k), cfg.max_turns,
                              episode_offset=k)
            commit_episodes(writer, task, run, ep, "critic", 0, cfg.gamma, {"phase": "critic"})
            board.add(k, **{"critic/success_rate": ep.success_rate(), "critic/offmap_rate": ep.offmap_rate()})
        if not critic_file.is_file():
            writer.sync()  # the critic reads back the episodes just committed
            table = HistoryReader(location).table(columns=["phase", "state", "mc_return"]).to_pandas()
            table = table[table["phase"] == "critic"]
            critic, losses = fit_critic(LMFeatures(model, tokenizer), list(table["state"]),
                                        table["mc_return"].to_numpy(), cfg.critic_epochs, cfg.critic_learning_rate,
                                        cfg.seed)
            critic.save(critic_file)
            summary["critic"] = {"rows": len(table), "mse_first": losses[0], "mse_last": losses[-1],
                                 "return_var": float(table["mc_return"].var())}
            for i, loss in enumerate(losses):
                board.add(i, **{"critic/mse": loss})
            write_json_atomic(summary_path, summary)
            print(f"critic: MSE {losses[0]:.4f} -> {losses[-1]:.4f} on {len(table)} turns "
                  f"(return variance {summary['critic']['return_var']:.4f})", flush=True)
    if critic is None and critic_file.is_file():  # fit by an earlier run
        critic = LMCritic.load(critic_file, LMFeatures(model, tokenizer))

    if "simpo" in cfg.phase_list:
        from peft import get_peft_model, set_peft_model_state_dict

        from ad.config.groups import peft_lora_config

        model = get_peft_model(model, peft_lora_config(cfg.lora_dict()))
        actor.model = model
        if critic is not None:
            critic.features.model = model  # features with the adapter disabled = the frozen base LM
        committed = [k for k in range(cfg.simpo_iterations) if f"simpo-i{k:04d}" in done]
        if committed != list(range(len(committed))):
            raise UserError(f"{cfg.out} holds SimPO iterations {committed}, not a prefix 0..k-1; use a new --out")
        if committed:
            from safetensors.torch import load_file

            saved = ckpt / f"actor-i{len(committed) - 1:04d}" / "adapter_model.safetensors"
            if not saved.is_file():
                raise UserError(f"{cfg.out} has {len(committed)} committed SimPO iterations but no {saved}; the "
                                "adapter to resume from is gone: use a new --out folder")
            set_peft_model_state_dict(model, load_file(str(saved)))
        optimizer = make_optimizer(model, cfg.simpo_learning_rate)
        if committed and (saved_optim := ckpt / f"actor-i{len(committed) - 1:04d}" / OPTIMIZER_FILE).is_file():
            optimizer.load_state_dict(torch.load(saved_optim, map_location="cpu", weights_only=True))
        for k in _progress(range(len(committed), cfg.simpo_iterations), "SimPO iterations", cfg.progress):
            actor.generator = torch.Generator().manual_seed(cfg.seed * 100_003 + k)
            rollouts = run_episodes(actor, rewards, _draw(train, cfg.num_envs, cfg.seed, 2, k), cfg.max_turns,
                                    episode_offset=k)
            pairs, pair_ep = sample_pairs(actor, critic, rewards, _draw(train, cfg.simpo_states, cfg.seed, 3, k),
                                          cfg.gamma, episode_offset=k * cfg.simpo_states,
                                          samples=cfg.simpo_samples, progress_bonus=cfg.progress_bonus,
                                          candidates=all_move_lists(cfg.max_moves) if cfg.simpo_chosen == "all"
                                          else None)
            pair_ep.rows["stream"] = [cfg.num_envs + s for s in pair_ep.rows["stream"]]
            logs = {}
            if pairs and cfg.simpo_trainer == "trl":
                logs = train_simpo(model, tokenizer, pairs, str(run_dir / "trainer"), cfg.simpo_beta, cfg.simpo_gamma,
                                   cfg.simpo_learning_rate, cfg.simpo_epochs, cfg.simpo_batch, cfg.seed + k,
                                   cfg.progress, optimizer, nll=cfg.simpo_nll)
            elif pairs:
                logs = train_shared_prefix_simpo(model, tokenizer, pairs, optimizer, cfg.simpo_beta, cfg.simpo_gamma,
                                                 cfg.simpo_epochs, cfg.simpo_batch, cfg.seed + k, cfg.simpo_nll,
                                                 cfg.progress)
            folder = ckpt / f"actor-i{k:04d}"
            tmp = folder.with_name(folder.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            model.save_pretrained(str(tmp))
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
            shutil.rmtree(folder, ignore_errors=True)
            tmp.rename(folder)
            phases = ["simpo-rollout"] * len(rollouts.rows["reward"]) + ["simpo-pair"] * len(pair_ep.rows["reward"])
            commit_episodes(writer, f"simpo-i{k:04d}", run, concat(rollouts, pair_ep), phases, k, cfg.gamma,
                            {"phase": "simpo", "pairs": len(pairs), "rollout_success": rollouts.success_rate(),
                             "rollout_offmap": rollouts.offmap_rate(), "loss": logs.get("loss"),
                             "last_step": {name: v for name, v in logs.items() if name != "loss"}})
            board.add(k, **{"simpo/success_rate": rollouts.success_rate(), "simpo/offmap_rate": rollouts.offmap_rate(),
                            "simpo/pairs": len(pairs), **({"simpo/loss": logs["loss"]} if "loss" in logs else {})})
        evaluate("eval-after", cfg.simpo_iterations)
    writer.close()
    board.close()
    summary["seconds_this_run"] = time.perf_counter() - start
    write_json_atomic(summary_path, summary)
    if cfg.plots:
        from tasks.gridworld.plots import plot_rates

        plot_rates(location, run_dir / "rates.png")
    print(f"done in {summary['seconds_this_run']:.1f}s -> {out}")
    return summary
