"""``ad generate textworld``: base LM -> SFT on gold paths -> PPO on CookingWorld, every episode logged.

Units (task = phase part, run = ``--seed``), in the order they are made: ``base-test``, ``base-train`` (the base
LM, greedy), ``gold`` (the SFT games' gold paths), ``sft-test``, ``sft-train``, ``ppo-i0000`` ... (each PPO
iteration's sampled rollouts), ``ppo-test``, ``ppo-train``. The train-fold evaluation games are the first
``--train-eval-games`` SFT games, so a train / held-out gap shows. Resume: a complete unit is never rewritten; the
SFT adapter and every PPO iteration's weights, value head and optimiser are saved in ``<out>/_run`` before the
next unit starts, and an iteration whose rollouts are on disk but whose update is not replays the same draws.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ad.files import run_folder, write_json_atomic
from ad.config import data_options
from ad.history import HistoryReader, HistoryWriter, Location
from ad.progress import PhaseLog
from tasks.textworld.config import GenerateConfig
from tasks.textworld.games import GameOptions
from tasks.textworld.history import SPEC, episode_columns
from tasks.textworld.rollouts import Episode, Game, fold_games, gold_demonstrations, play, summary

FAMILY = "textworld"


def game_options(cfg: GenerateConfig) -> GameOptions:
    """The game options of a config."""
    return GameOptions(game=cfg.game, num_locations=cfg.num_locations, include_doors=cfg.include_doors,
                       num_distractors=cfg.num_distractors, num_ingredients=cfg.num_ingredients,
                       step_limit=cfg.step_limit)


def unit_names(cfg: GenerateConfig) -> dict[str, list[str]]:
    """Unit names by split: held-out = the test-fold evaluations."""
    train = ["base-train", "gold", "sft-train"] + [f"ppo-i{k:04d}" for k in range(cfg.ppo_iterations)] + \
        ["ppo-train"]
    return {"train": train, "heldout": ["base-test", "sft-test", "ppo-test"]}


def dataset_metadata(cfg: GenerateConfig, test_games: Sequence[Game], sft_games: Sequence[Game],
                     train_eval: Sequence[Game]) -> dict[str, Any]:
    """task_spec, source config, seeds, split and the games of each role."""
    options = game_options(cfg)
    return {
        "task_spec": {"env": "textworld", "gym_id": "ad/CookingWorld-v0",
                      "env_class": "tasks.textworld.env:CookingWorldEnv", **options.game_dict(),
                      "game_params": options.game_params(), "template": "textworld", "history": cfg.history,
                      "pinned_commands": list(cfg.pinned_commands), "transcript": cfg.transcript,
                      "max_prompt_tokens": cfg.max_prompt_tokens,
                      "state": "the prompt the policy scored commands after (tasks.textworld.prompts)",
                      "action": "the command", "reward": "change of the game's normalised score (0..1)"},
        "source": {"algorithm": "base -> SFT (trl SFTTrainer, LoRA) -> PPO (value head, GAE, clipped ratio, KL "
                                "to SFT)", "implementation": "tasks.textworld.generate",
                   "config": data_options(cfg)},
        "seeds": {"seed": cfg.seed, "run": cfg.seed},
        "split": unit_names(cfg),
        "games": {"test": [s for _, s in test_games], "sft": [s for _, s in sft_games],
                  "train_eval": [s for _, s in train_eval]},
    }


class Run:
    """One ``ad generate textworld`` run: the writer, the run folder, progress and the phase results."""

    def __init__(self, cfg: GenerateConfig) -> None:
        self.cfg, self.options = cfg, game_options(cfg)
        self.test_games = fold_games(self.options, "test", cfg.eval_games, cfg.seed)
        self.sft_games = fold_games(self.options, "train", max(cfg.sft_games, cfg.train_eval_count()), cfg.seed)
        self.train_eval = self.sft_games[:cfg.train_eval_count()]
        self.sft_games = self.sft_games[:cfg.sft_games]
        self.location = Location.of(cfg.out)
        self.writer = HistoryWriter(self.location, spec=SPEC, family=FAMILY,
                                    metadata=dataset_metadata(cfg, self.test_games, self.sft_games, self.train_eval))
        self.run_dir = run_folder(cfg.out, self.location)
        self.results: dict[str, dict[str, Any]] = {}
        self.started = time.time()
        self.log = PhaseLog("textworld", show=cfg.progress)  # a timestamped line per phase

    def done(self, name: str) -> dict[str, Any] | None:
        """The recorded summary of a complete unit, or None."""
        if not self.writer.is_complete(name, self.cfg.seed):
            return None
        units = [u for u in HistoryReader(self.location).units(tasks=[name], runs=[self.cfg.seed])]
        return units[0].get("info", {}) if units else {}

    def write(self, name: str, episodes: Sequence[Episode], phase: str, update: int,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Commit one unit of episodes; returns its summary (also recorded in the unit)."""
        info = {**summary(episodes), "phase": phase, "update": update, **(extra or {})}
        with self.writer.unit(name, self.cfg.seed) as unit:  # aborted on any exception
            unit.append(episode_columns(episodes, phase, update))
            unit.commit(info=info)
        return info

    def play(self, policy: Any, games: Sequence[Game], desc: str, **kwargs: Any) -> list[Episode]:
        """Play games with a progress bar over moves."""
        from ad.progress import Progress

        with Progress(None, desc=desc, unit="move", show=self.cfg.progress) as bar:
            history, pinned = self.cfg.prompt_window()
            return play(policy, games, self.options, history, pinned=pinned,
                        on_move=bar.update if self.cfg.progress else None, **kwargs)

    def evaluate(self, phase: str, update: int, policy_fn: Callable[[], Any]) -> None:
        """Greedy play on the held-out test games and the train-fold evaluation games (skips complete units)."""
        for fold, games in (("test", self.test_games), ("train", self.train_eval)):
            name = f"{phase}-{fold}"
            info = self.done(name)
            if info is None:
                info = self.write(name, self.play(policy_fn(), games, f"{name} ({len(games)} games)"), phase,
                                  update)
            self.results[name] = info
            self.log(f"{name}: success {info['success']:.3f}, mean normalised score {info['score']:.3f}, "
                     f"{info['moves']:.1f} moves ({info['games']} games)")


def generate(cfg: GenerateConfig) -> Path | str:
    """Run base -> SFT -> PPO on CookingWorld and log every episode to ``cfg.out``; returns its path."""
    import torch
    from peft import get_peft_model

    from ad.config.groups import peft_lora_config
    from ad.lm.pretrained import load_base
    from tasks.textworld import training

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    run = Run(cfg)
    local = run.location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    try:
        model, tokenizer = load_base(cfg.model, dtype=cfg.dtype)
        if torch.cuda.is_available():  # every phase runs where the weights are (scoring, SFT, PPO)
            model = model.cuda()
        policy = training.policy_factory(cfg, tokenizer)
        run.evaluate("base", 0, lambda: policy(model, None))

        demos = gold_demonstrations(run.sft_games, run.options, *cfg.prompt_window())
        if run.done("gold") is None:
            run.write("gold", demos, "gold", 0)
        run.results["gold"] = summary(demos)
        run.log(f"gold paths of {len(demos)} SFT games: success {run.results['gold']['success']:.3f} within "
                f"{cfg.step_limit} moves, {sum(len(d) for d in demos)} demonstrated moves")

        sft_model = training.sft_model(cfg, model, tokenizer, demos, run.run_dir, run.log)
        run.evaluate("sft", 1, lambda: policy(sft_model, None))

        ppo_model = get_peft_model(sft_model, peft_lora_config(cfg.lora_dict()))  # adapter off = the reference
        learner = training.ppo_learner(cfg, ppo_model, tokenizer)
        start = training.load_ppo_checkpoint(run.run_dir, ppo_model, learner)
        for k in range(start):  # iterations done before a resume: their recorded summaries
            run.results[f"ppo-i{k:04d}"] = run.done(f"ppo-i{k:04d}") or {}
        if start:
            run.log(f"resuming PPO after iteration {start} (weights, value head and optimiser from {run.run_dir})")
        acting = policy(ppo_model, learner.value_head)
        for k in range(start, cfg.ppo_iterations):
            name = f"ppo-i{k:04d}"
            games = fold_games(run.options, "train", cfg.ppo_games, cfg.seed, salt=1 + k)
            generator = torch.Generator().manual_seed(cfg.seed * 100_003 + k)
            episodes = run.play(acting, games, f"{name} ({len(games)} games, sampled)", greedy=False,
                                temperature=cfg.temperature, generator=generator)
            stats = learner.update(training.collect(cfg, episodes, ppo_model, tokenizer))
            info = run.done(name) or run.write(name, episodes, "ppo", 2 + k, {"stats": stats})
            training.save_ppo_checkpoint(run.run_dir, k + 1, ppo_model, learner)
            run.results[name] = info
            run.log(f"{name}: train success {info['success']:.3f}, score {info['score']:.3f}; " +
                    ", ".join(f"{key} {value:.4g}" for key, value in stats.items()))
        training.merge_for_evaluation(ppo_model)  # the last checkpoint is saved: evaluate at the merged speed
        run.evaluate("ppo", 2 + cfg.ppo_iterations, lambda: acting)
    finally:
        run.writer.close()  # records every committed unit in dataset.json, also when interrupted
    path = run.run_dir / "summary.json"
    before = json.loads(path.read_text()).get("seconds", 0.0) if path.is_file() else 0.0
    write_json_atomic(path, {"seed": cfg.seed, "results": run.results, "seconds": before + time.time() - run.started,
                             "seconds_note": "wall time of every invocation that wrote to this run, summed"})
    from tasks.textworld.plots import plot_phases

    plot_phases(run.results, run.run_dir / "phases.png", cfg.seed)
    run.log(f"done -> {out}")
    return out
