"""TextWorld SFT learning curve: how well the SFT policy follows held-out gold paths as training goes on, and what
greedy play on held-out games gives at the end.

``ad generate textworld``'s held-out success after SFT is low (0.08 / 0.16 on seeds 0 / 1 at 32 moves, session 17)
and about the same on the very games it trained on: the policy underfits rather than fails to generalise. A game
of ~20 moves is won only if every move is right, so success follows the per-move accuracy closely (0.9 per move
gives ~0.12 over 20 moves). This script measures that per-move accuracy, teacher-forced on gold paths (cheap: one
scoring pass per move, no env), on held-out (test-fold) games and on SFT games, before SFT and at the end of every
epoch, then plays the held-out games greedily once. Same game draws, prompts and options as ``ad generate
textworld --seed S`` (its defaults, overridden with ``--set``).

    python benchmarks/textworld_sft_curve.py run --seed 0 --out data/sft-curve --set sft_epochs=2 step_limit=32 \\
        dtype=bfloat16 sft_games=64 eval_games=64 threads=1 sft_micro_batch_size=4
    python benchmarks/textworld_sft_curve.py report --out data/sft-curve --seeds 0 1 --name textworld_sft_curve
    python benchmarks/textworld_sft_curve.py --quick     # a tiny LM, 4 games: well under a minute

``run`` writes ``<out>/seed<S>.json``; ``report`` gathers the seeds into benchmarks/results/<name>.json and .png.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, report  # noqa: E402


def _config(seed: int, sets: list[str], out: Path) -> Any:
    from ad.config import make_config
    from tasks.textworld.config import GenerateConfig

    values: dict[str, Any] = {"seed": seed, "out": str(out / f"seed{seed}-scratch"), "progress": True}
    for item in sets:
        key, _, value = item.partition("=")
        values[key] = value
    return make_config(GenerateConfig, values)


def run(seed: int, sets: list[str], out: Path, accuracy_games: int, model_name: str | None = None,
        play_games: int = 0) -> dict[str, Any]:
    """SFT with a per-epoch accuracy readout (none with ``accuracy_games`` 0), then greedy play on the held-out
    games (the first ``play_games`` of them; 0 = all); writes seed<S>.json."""
    import torch
    from transformers import TrainerCallback

    from ad.lm.pretrained import load_base
    from tasks.textworld import training
    from tasks.textworld.generate import game_options
    from benchmarks.helpers.textworld_outcomes import move_accuracy
    from tasks.textworld.rollouts import fold_games, gold_demonstrations, play, summary
    from tasks.textworld.sft import train_sft

    cfg = _config(seed, sets + ([f"model={model_name}"] if model_name else []), out)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    started = time.time()
    options = game_options(cfg)
    test_games = fold_games(options, "test", cfg.eval_games, cfg.seed)  # the draws of ad generate textworld
    sft_games = fold_games(options, "train", max(cfg.sft_games, cfg.eval_games), cfg.seed)[:cfg.sft_games]
    history, pinned = cfg.prompt_window()
    demos = gold_demonstrations(sft_games, options, history, pinned)
    held_gold = gold_demonstrations(test_games[:accuracy_games], options, history, pinned)
    train_gold = demos[:accuracy_games // 2]
    model, tokenizer = load_base(cfg.model, dtype=cfg.dtype)
    make = training.policy_factory(cfg, tokenizer)
    curve: list[dict[str, Any]] = []

    def readout(m: Any, epoch: float) -> None:
        if not held_gold:
            return
        point = {"epoch": epoch, "seconds": time.time() - started,
                 "heldout": move_accuracy(make(m, None), held_gold), "train": move_accuracy(make(m, None), train_gold)}
        curve.append(point)
        print(f"[sft-curve seed {seed}] epoch {epoch:.2f}: held-out move accuracy {point['heldout']['accuracy']:.3f} "
              f"(games all right {point['heldout']['all_moves']:.3f}), train {point['train']['accuracy']:.3f} "
              f"({point['train']['all_moves']:.3f}), {point['seconds']:.0f} s", flush=True)

    class EpochReadout(TrainerCallback):
        def on_epoch_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            readout(model, float(state.epoch))

    adapter = out / f"seed{seed}-sft-adapter"  # what ad generate textworld's _run/sft-adapter holds
    if (adapter / "adapter_config.json").is_file():  # a re-run plays with the SFT it already trained
        from peft import PeftModel

        print(f"[sft-curve seed {seed}] SFT adapter found in {adapter}: not retraining", flush=True)
        peft = PeftModel.from_pretrained(model, str(adapter))
    else:
        readout(model, 0.0)
        torch.manual_seed(cfg.seed)
        peft = train_sft(model, tokenizer, demos, out / f"seed{seed}-trainer", epochs=cfg.sft_epochs,
                         lr=cfg.sft_learning_rate, batch_size=cfg.sft_batch_size,
                         max_prompt_tokens=cfg.max_prompt_tokens,
                         lora=cfg.lora_dict(), seed=cfg.seed, progress=cfg.progress,
                         micro_batch_size=cfg.sft_micro_batch_size, callbacks=[EpochReadout()],
                         transcript=cfg.transcript)
        peft.save_pretrained(str(adapter))
    play_started = time.time()
    merged = peft.merge_and_unload()
    merged.eval()
    episodes = play(make(merged, None), test_games[:play_games or None], options, history, pinned=pinned)
    ends = {"success": sum(e.success for e in episodes),
            "failed": sum(e.terminated[-1] and not e.success for e in episodes if e.terminated),
            "at_limit": sum(bool(e.truncated and e.truncated[-1]) for e in episodes)}
    result = {"seed": seed, "options": {k: getattr(cfg, k) for k in (
                  "sft_games", "sft_epochs", "sft_learning_rate", "sft_batch_size", "sft_micro_batch_size",
                  "step_limit", "history", "transcript", "max_prompt_tokens", "dtype", "eval_games", "lora_r")},
              "accuracy_games": {"heldout": len(held_gold), "train": len(train_gold)},
              "curve": curve, "heldout_play": {**summary(episodes), "ends": ends,
                                               "seconds": time.time() - play_started},
              "seconds": time.time() - started}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"seed{seed}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"[sft-curve seed {seed}] held-out play: success {result['heldout_play']['success']:.3f}, score "
          f"{result['heldout_play']['score']:.3f}, ends {ends}; {result['seconds']:.0f} s", flush=True)
    return result


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Left: per-move accuracy (held-out solid, SFT games dashed) against epochs, one colour per seed (when read);
    right: held-out success and score of greedy play after SFT per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for r, colour in zip(results, ["C0", "C1", "C2", "C3"]):
        epochs = [p["epoch"] for p in r["curve"]]
        left.plot(epochs, [p["heldout"]["accuracy"] for p in r["curve"]], "-o", color=colour,
                  label=f"seed {r['seed']} held-out")
        left.plot(epochs, [p["train"]["accuracy"] for p in r["curve"]], "--", color=colour,
                  label=f"seed {r['seed']} SFT games")
    left.set(xlabel="SFT epochs", ylabel="greedy move = gold move (teacher-forced)", ylim=(0, 1),
             title="per-move accuracy on gold paths" + ("" if any(r["curve"] for r in results) else " (not read)"))
    left.grid(alpha=0.3)
    if any(r["curve"] for r in results):
        left.legend(fontsize=7)
    x = range(len(results))
    right.bar([i - 0.2 for i in x], [r["heldout_play"]["success"] for r in results], 0.4, label="success")
    right.bar([i + 0.2 for i in x], [r["heldout_play"]["score"] for r in results], 0.4, label="normalised score")
    right.set_xticks(list(x), [f"seed {r['seed']}\n{r['heldout_play']['games']} games" for r in results])
    right.set(ylim=(0, 1), title="held-out greedy play after SFT")
    right.legend(fontsize=7)
    fig.suptitle(f"TextWorld SFT ({'transcript' if results[0]['options'].get('transcript') else 'windowed'} prompts)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def gather(out: Path, seeds: list[int], name: str, quick: bool) -> Path:
    """benchmarks/results/<name>.json (+ .png) from the seeds' run files."""
    results = [json.loads((out / f"seed{s}.json").read_text()) for s in seeds]
    figures = []
    for r in results:
        s, games = r["seed"], r["heldout_play"]["games"]
        mine = [
            figure(f"held-out success after SFT, seed {s} ({games} games)", "fraction", r["heldout_play"]["success"],
                   None, "well above base (0)"),
            figure(f"held-out score after SFT, seed {s} ({games} games)", "fraction", r["heldout_play"]["score"],
                   None, "well above base (0)"),
        ]
        if r["curve"]:
            last = r["curve"][-1]
            mine += [
                figure(f"held-out move accuracy before SFT, seed {s}", "fraction",
                       r["curve"][0]["heldout"]["accuracy"], None, "diagnostic"),
                figure(f"held-out move accuracy after SFT ({last['epoch']:.0f} epochs), seed {s}", "fraction",
                       last["heldout"]["accuracy"], None, "diagnostic"),
                figure(f"SFT-game move accuracy after SFT, seed {s}", "fraction", last["train"]["accuracy"], None,
                       "diagnostic"),
            ]
        for fig in mine:
            fig["settings"] = {**r["options"], "ends": r["heldout_play"]["ends"], "seconds": round(r["seconds"])}
        figures += mine
    path = report(name, figures, quick, page="textworld")
    plot(results, (RESULTS / f"{name}{'_quick' if quick else ''}.png"))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=["run", "report"], help="run one seed, or gather seeds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=Path("data/bench-textworld-sft-curve"))
    parser.add_argument("--set", nargs="*", default=[], help="ad generate textworld options as key=value")
    parser.add_argument("--accuracy-games", type=int, default=24, help="held-out gold paths read each epoch "
                                                                        "(half as many SFT games)")
    parser.add_argument("--play-games", type=int, default=0, help="held-out games played greedily after SFT (the "
                                                                     "first of --eval-games; 0 = all)")
    parser.add_argument("--name", default="textworld_sft_curve")
    parser.add_argument("--quick", action="store_true", help="a tiny random LM, 4 games, 1 epoch")
    args = parser.parse_args()
    if args.quick:
        import tempfile

        from benchmarks.helpers.tiny_lm import build_tiny

        out = Path(tempfile.mkdtemp())
        sets = ["eval_games=4", "sft_games=4", "sft_epochs=1", "sft_batch_size=4", "sft_micro_batch_size=2",
                "max_prompt_tokens=128", "threads=1", "progress=false"]
        run(0, sets, out, 2, model_name=str(build_tiny(out / "tiny", width=32, max_positions=1024)))
        gather(out, [0], args.name, quick=True)
    elif args.mode == "run":
        run(args.seed, args.set, args.out, args.accuracy_games, play_games=args.play_games)
    elif args.mode == "report":
        gather(args.out, args.seeds, args.name, quick=False)
    else:
        parser.error("give run, report or --quick")


if __name__ == "__main__":
    main()
