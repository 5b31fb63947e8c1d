"""TextWorld (CookingWorld) figures: env throughput of our Gymnasium wrapper vs raw TextWorldExpress, acting
throughput of the batched valid-command scorer (many games in one batch vs one game at a time, same model), SFT
throughput (ours vs trl's SFTTrainer defaults, same rows), and the held-out / train-fold success and normalised
score of the base LM, after SFT and after PPO (``ad generate textworld``'s own evaluation, per seed).

    python benchmarks/textworld.py [--parts env acting sft learning] [--seeds 0 1] [--out data/bench-textworld]
                                   [--model smollm2-135m] [--acting GAMES MOVES] [--dtype bfloat16]
                                   [--set eval_games=64 ...]
    python benchmarks/textworld.py --quick     # small version of every part, well under a minute with a tiny LM

Timings are taken on a CPU shared with other jobs (recorded as ``load`` in the JSON); each ratio is measured side
by side in one run, the two sides interleaved. Results: benchmarks/results/textworld.json (+ textworld.png).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, parse_args, report  # noqa: E402

LOAD_NOTE = "CPU shared with other agents' jobs (timings under load; the ratio is measured side by side)"


def load_note() -> str:
    """Where the timings were taken: the GPU's name when one is used, else the shared-CPU note."""
    import torch

    if torch.cuda.is_available():
        return f"GPU: {torch.cuda.get_device_name()} (the model and scoring on it; games and Python on the host CPU)"
    return LOAD_NOTE


def _play(reset, step, seeds: list[int], steps: int, rng_seed: int) -> int:
    """Random valid commands (same draws for both sides) in each game; returns moves made."""
    rng = np.random.default_rng(abs(rng_seed) + (rng_seed < 0) * 1000)
    moves = 0
    for s in seeds:
        valid = reset(s)
        for _ in range(steps):
            valid, done = step(sorted(valid)[rng.integers(len(valid))])
            moves += 1
            if done:
                break
    return moves


def env_throughput(games: int, steps: int, repeats: int) -> dict[str, Any]:
    """Moves per second of CookingWorldEnv vs TextWorldExpressEnv on the same games and commands."""
    from textworld_express import TextWorldExpressEnv

    from tasks.textworld.env import CookingWorldEnv
    from tasks.textworld.games import GameOptions

    ours = CookingWorldEnv(fold="train", step_limit=steps)
    raw = TextWorldExpressEnv(envStepLimit=steps)
    raw.load("cookingworld", GameOptions().game_params())
    seeds = ours.fold_seeds[:games].tolist()

    def ours_reset(s):
        return ours.reset(options={"game_seed": s})[1]["valid_actions"]

    def ours_step(a):
        _, _, term, trunc, info = ours.step(a)
        return info["valid_actions"], term or trunc

    def raw_reset(s):
        return raw.reset(seed=s, gameFold="train")[1]["validActions"]

    def raw_step(a):
        _, _, done, info = raw.step(a)
        return info["validActions"], done

    rates = {"ours": [], "raw": []}
    _play(ours_reset, ours_step, seeds, steps, -1), _play(raw_reset, raw_step, seeds, steps, -1)  # JIT warm-up
    for r in range(repeats):  # interleaved: both sides see the same load
        sides = [("ours", (ours_reset, ours_step)), ("raw", (raw_reset, raw_step))]
        for name, (reset, step) in sides if r % 2 == 0 else sides[::-1]:  # alternate who goes first
            start = time.perf_counter()
            moves = _play(reset, step, seeds, steps, r)
            rates[name].append(moves / (time.perf_counter() - start))
    raw.close()
    return {k: float(np.median(v)) for k, v in rates.items()}


def acting_throughput(model_name: str, games: int, moves: int, history: int, repeats: int,
                      dtype: str = "float32") -> dict[str, Any]:
    """Moves/s of the same policy scoring ``games`` games in one batch vs one game at a time (greedy, the first
    ``moves`` moves of each game, so both sides make the same decisions)."""
    from ad.lm.pretrained import load_base
    from tasks.textworld.games import GameOptions
    from tasks.textworld.policy import TextWorldPolicy
    from tasks.textworld.rollouts import fold_games, play

    import torch

    model, tokenizer = load_base(model_name, dtype=dtype)
    if torch.cuda.is_available():  # as ad generate textworld does
        model = model.cuda()
    options = GameOptions(step_limit=moves)
    chosen = fold_games(options, "test", games, 0)
    rates: dict[str, list[float]] = {"batched": [], "single": []}
    actions: dict[str, list[list[str]]] = {}
    play(TextWorldPolicy(model, tokenizer, max_prompt_tokens=640, batch=2), chosen[:2], GameOptions(step_limit=1),
         history)  # warm-up (kernels, allocator, the JVM): not timed
    for _ in range(repeats):
        for name, batch in (("batched", games), ("single", 1)):
            policy = TextWorldPolicy(model, tokenizer, max_prompt_tokens=640, batch=batch)
            start = time.perf_counter()
            episodes = play(policy, chosen, options, history)
            rates[name].append(sum(len(e) for e in episodes) / (time.perf_counter() - start))
            actions[name] = [e.actions for e in episodes]
    return {"batched": float(np.median(rates["batched"])), "single": float(np.median(rates["single"])),
            "same_actions": actions["batched"] == actions["single"]}


def transcript_throughput(model_name: str, games: int, moves: int, repeats: int, dtype: str) -> dict[str, Any]:
    """Moves/s of greedy play with transcript prompts (the whole game, each game's keys and values cached between
    moves) vs windowed prompts (one earlier move, the recipe pinned, 512 tokens: the default), the same ``games``
    games in one batch for their first ``moves`` moves, the same model; the two sides interleaved."""
    from ad.lm.pretrained import load_base
    from tasks.textworld.games import GameOptions
    from tasks.textworld.policy import TextWorldPolicy
    from tasks.textworld.rollouts import fold_games, play

    import torch

    model, tokenizer = load_base(model_name, dtype=dtype)
    if torch.cuda.is_available():
        model = model.cuda()
    options = GameOptions(step_limit=moves)
    chosen = fold_games(options, "test", games, 0)
    sides = {"transcript": (TextWorldPolicy(model, tokenizer, max_prompt_tokens=256 * max(moves, 32), batch=games,
                                            transcript=True), moves, []),
             "windowed": (TextWorldPolicy(model, tokenizer, max_prompt_tokens=512, batch=games), 1, ["read cookbook"])}
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, (policy, history, pinned) in sides.items():
            start = time.perf_counter()
            episodes = play(policy, chosen, options, history, pinned=pinned)
            rates[name].append(sum(len(e) for e in episodes) / (time.perf_counter() - start))
    return {name: float(np.median(r)) for name, r in rates.items()}


def sft_throughput(model_name: str, games: int, steps: int, repeats: int, dtype: str) -> dict[str, Any]:
    """Demonstrated moves/s of SFT steps (batch 8) as ``ad generate textworld`` runs them (the loss on the command
    tokens only, activations kept) vs trl's own SFTTrainer with its defaults (its fused LM head over every position,
    activation checkpointing on), the same rows and steps; a fresh model per run."""
    import tempfile

    from ad.lm.pretrained import load_base
    from tasks.textworld.games import GameOptions
    from tasks.textworld.rollouts import fold_games, gold_demonstrations
    from tasks.textworld.sft import sft_rows, sft_trainer

    options = GameOptions()
    demos = gold_demonstrations(fold_games(options, "train", games, 0), options, 1)
    rates: dict[str, list[float]] = {"ours": [], "trl": []}
    losses: dict[str, float] = {}
    lora = {"lora_r": 16, "lora_alpha": 32.0, "lora_dropout": 0.0, "target_modules": ["all-linear"]}
    for r in range(repeats):
        sides = [("ours", True), ("trl", False)]
        for name, ours in sides if r % 2 == 0 else sides[::-1]:  # interleaved, alternating who goes first
            model, tokenizer = load_base(model_name, dtype=dtype)
            rows = sft_rows(tokenizer, demos, 384)[:8 * steps]
            trainer = sft_trainer(model, tokenizer, rows, Path(tempfile.mkdtemp()), epochs=1.0, lr=5e-4, batch_size=8,
                                  lora=lora, seed=0, progress=False, command_loss=ours,
                                  activation_checkpointing=not ours)
            start = time.perf_counter()
            result = trainer.train()
            rates[name].append(len(rows) / (time.perf_counter() - start))
            losses[name] = float(result.training_loss)
    return {"ours": float(np.median(rates["ours"])), "trl": float(np.median(rates["trl"])), "loss": losses}


LEARNING_QUICK = dict(eval_games=4, sft_games=8, sft_epochs=1.0, ppo_iterations=1, ppo_games=4, ppo_epochs=1,
                      step_limit=4, max_prompt_tokens=128, lora_r=4)
PHASE_LABEL = {"base": "of the base LM", "sft": "after SFT", "ppo": "after PPO"}


def recorded_results(out: Path, seed: int) -> dict[str, Any]:
    """The summaries ``ad generate textworld`` recorded in the complete units of ``out`` (a run stopped early has
    fewer), with ``seconds`` from its summary.json where the run finished."""
    from ad.history import HistoryReader, Location

    reader = HistoryReader(Location.of(str(out)))
    results: dict[str, Any] = {u["task"]: u.get("info", {}) for u in reader.units(runs=[seed])}
    results["settings"] = reader.metadata.get("source", {}).get("config", {})  # the options that made the data
    summary = out / "_run" / "summary.json"
    if summary.is_file():
        results["seconds"] = json.loads(summary.read_text())["seconds"]
    return results


def learning(args: argparse.Namespace, options: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``ad generate textworld`` once per seed (``--recorded``: read what earlier runs recorded); figures =
    per-phase success / score, mean over seeds, for the phases every seed completed."""
    from ad.config import make_config
    from tasks.textworld.config import GenerateConfig
    from tasks.textworld.generate import generate

    per_seed: dict[int, dict[str, Any]] = {}
    for seed in args.seeds:
        out = Path(args.out) / f"seed{seed}"
        if not args.recorded:
            generate(make_config(GenerateConfig, {"out": str(out), "seed": seed, "threads": args.threads, **options}))
        per_seed[seed] = recorded_results(out, seed)  # seconds: summed over invocations (a resume adds what it redid)
    figures = []
    for key, unit in (("success", "success rate"), ("score", "mean normalised score")):
        for fold, where in (("test", "held-out"), ("train", "train-fold")):
            for phase in ("base", "sft", "ppo"):
                if not all(f"{phase}-{fold}" in per_seed[s] for s in args.seeds):
                    print(f"{phase}-{fold}: not recorded for every seed in {args.out}; no figure")
                    continue
                values = [per_seed[s][f"{phase}-{fold}"][key] for s in args.seeds]
                games = per_seed[args.seeds[0]][f"{phase}-{fold}"]["games"]
                name = f"{where} {'success' if key == 'success' else 'normalised score'} {PHASE_LABEL[phase]}"
                fig = figure(name, f"{unit} ({games} {fold}-fold games, greedy, seeds {args.seeds})",
                             float(np.mean(values)), None,
                             {"base": "baseline", "sft": "well above base", "ppo": ">= SFT"}[phase])
                fig["per_seed"] = [{"seed": s, "ours": v} for s, v in zip(args.seeds, values)]
                fig["spread"] = [float(min(values)), float(max(values))]
                fig["settings"] = per_seed[args.seeds[0]]["settings"]  # ad generate textworld options (seed aside)
                if games < 64:
                    fig["note"] = (f"{games} games per fold: a smoke-scale run, not the >= 64 games the goal is judged "
                                   f"on (compute budget: docs/experiments/textworld.md)")
                figures.append(fig)
    gold = [per_seed[s]["gold"]["success"] for s in args.seeds]
    figures.append({**figure("gold-path success within the step limit (the ceiling of success)", "success rate",
                             float(np.mean(gold)), None, "-"), "per_seed": [{"seed": s, "ours": v}
                                                                           for s, v in zip(args.seeds, gold)]})
    seconds = [per_seed[s].get("seconds", np.nan) for s in args.seeds]
    if all(np.isfinite(seconds)):
        figures.append({**figure("ad generate textworld wall time per seed (this benchmark's settings)", "s",
                                 float(np.mean(seconds)), None, "-"),
                        "per_seed": [{"seed": s, "ours": v} for s, v in zip(args.seeds, seconds)]})
    merged = {name: {key: [per_seed[s].get(name, {}).get(key, np.nan) for s in args.seeds]
                     for key in ("success", "score")} for name in per_seed[args.seeds[0]]
              if name not in ("seconds", "settings")}
    return figures, merged


def _part(fig: dict[str, Any]) -> str:
    """Which part of this benchmark a figure comes from."""
    name = fig["figure"]
    for part, prefix in (("env", "env throughput"), ("transcript", "transcript acting"), ("acting", "acting"),
                         ("sft", "SFT throughput")):
        if name.startswith(prefix):
            return part
    return "learning"


def _keep_other_parts(figures: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """This run's figures, plus the recorded ones of the parts it did not run (each keeps its own command/date)."""
    path = RESULTS / f"{args.name}{'_quick' if args.quick else ''}.json"
    if not path.is_file():
        return figures
    kept = [f for f in json.loads(path.read_text()) if _part(f) not in args.parts]
    for f in kept:  # report() stamps this run's command on every figure: keep the one that measured it
        f.setdefault("measured_with", {"command": f.get("command"), "date": f.get("date")})
    return kept + figures


def _settings(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs as config values (JSON where it parses, else the string)."""
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except ValueError:
            out[key.replace("-", "_")] = value
    return out


def _tiny_model(max_positions: int = 1024) -> str:
    """A tiny random LM folder (the --quick runs)."""
    import tempfile

    from benchmarks.helpers.tiny_lm import build_tiny

    return str(build_tiny(Path(tempfile.mkdtemp()) / "tiny", width=32, max_positions=max_positions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["env", "acting", "sft", "learning"],
                        choices=["env", "acting", "transcript", "sft", "learning"])
    parser.add_argument("--model", default="smollm2-135m", help="policy LM (acting and learning parts)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="generate seeds (held-out game draws)")
    parser.add_argument("--out", default="data/bench-textworld", help="work folder (one dataset per seed)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--set", nargs="*", default=[], metavar="OPTION=VALUE",
                        help="ad generate textworld options of the learning part (e.g. eval_games=64 ppo_iterations=4)")
    parser.add_argument("--acting", type=int, nargs=2, default=[16, 1], metavar=("GAMES", "MOVES"),
                        help="acting part: games in the batch and moves per game")
    parser.add_argument("--transcript", type=int, nargs=2, default=[16, 24], metavar=("GAMES", "MOVES"),
                        help="transcript part: games in the batch and moves per game")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"],
                        help="weights (acting and sft parts)")
    parser.add_argument("--recorded", action="store_true",
                        help="learning part: read the phases the datasets under --out already hold (runs stopped "
                             "early give the phases they finished) instead of running ad generate textworld")
    parser.add_argument("--name", default="textworld",
                        help="results file benchmarks/results/NAME.json (+ .png); other settings, other names")
    parser.add_argument("--quick", action="store_true", help="a small version of the same work")
    args = parse_args(parser)
    import torch

    torch.set_num_threads(args.threads)
    figures: list[dict[str, Any]] = []
    if "env" in args.parts:
        games, steps, repeats = (10, 16, 2) if args.quick else (100, 16, 5)
        env = env_throughput(games, steps, repeats)
        fig = figure(f"env throughput: our Gymnasium wrapper / raw TextWorldExpressEnv ({games} CookingWorld games, "
                     f"random valid commands, <= {steps} moves, median of {repeats} interleaved repeats)",
                     "moves/s", env["ours"], env["raw"], ">= 0.8x")
        fig["load"] = load_note()
        figures.append(fig)
    if "acting" in args.parts:
        model = args.model if not args.quick else _tiny_model()
        games, moves, repeats = (8, 2, 1) if args.quick else (*args.acting, 1)
        act = acting_throughput(model, games, moves, history=1, repeats=repeats, dtype=args.dtype)
        fig = figure(f"acting throughput: {games} games in one batch / one game at a time ({model}, {args.dtype}, "
                     f"same greedy moves: {act['same_actions']}, first {moves} moves of each game)", "moves/s",
                     act["batched"], act["single"], ">= 8x")
        fig["load"] = load_note()
        figures.append(fig)
    if "transcript" in args.parts:
        model = args.model if not args.quick else _tiny_model(max_positions=16384)
        games, moves, repeats = (2, 3, 1) if args.quick else (*args.transcript, 2)
        rate = transcript_throughput(model, games, moves, repeats, args.dtype)
        fig = figure(f"transcript acting throughput: transcript prompts (whole game, keys and values cached across moves) / "
                     f"windowed prompts (one earlier move, recipe pinned, 512 tokens), {games} games in one batch, "
                     f"first {moves} moves, greedy ({model}, {args.dtype}, median of {repeats} interleaved repeats)",
                     "moves/s", rate["transcript"], rate["windowed"], "faster")
        fig["load"] = load_note()
        figures.append(fig)
    if "sft" in args.parts:
        model = args.model if not args.quick else _tiny_model()
        games, steps, repeats = (2, 1, 1) if args.quick else (8, 4, 2)
        sft = sft_throughput(model, games, steps, repeats, args.dtype)
        fig = figure(f"SFT throughput: ours (loss on the command tokens only, activations kept) / trl's SFTTrainer "
                     f"defaults ({model}, {args.dtype}, "
                     f"{steps} steps of 8 demonstrated moves, median of {repeats} interleaved repeats; training loss "
                     f"ours {sft['loss']['ours']:.4f}, trl {sft['loss']['trl']:.4f})", "moves/s", sft["ours"],
                     sft["trl"], "faster, same loss")
        fig["load"] = load_note()
        figures.append(fig)
    if "learning" in args.parts:
        options = {"model": args.model if not args.quick else _tiny_model(), **(LEARNING_QUICK if args.quick
                                                                                 else {}), **_settings(args.set)}
        learned, merged = learning(args, options)
        figures += learned
        from tasks.textworld.plots import plot_phases

        plot_phases(merged, RESULTS / f"{args.name}{'_quick' if args.quick else ''}.png", args.seeds)
    report(args.name, _keep_other_parts(figures, args), args.quick, page="textworld")


if __name__ == "__main__":
    main()
