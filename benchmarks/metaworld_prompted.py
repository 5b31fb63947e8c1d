"""Meta-World ML1: does a trained AD act on what its context shows? Each held-out goal's context is first filled
with the source's own first k episodes on that goal (teacher-forced: its states, actions and rewards, as in AD's
training windows), then AD acts in the env for the next episodes; its success there, against the source's own in
the same episodes and against AD's with an empty context (k = 0, the plain ``ad eval``).

If AD has distilled what the source does across episodes (the search source returns to the best-rewarded position of
its history), a context holding the source's successful episodes makes AD succeed about as often as the source's next
episode; if AD's success stays at its k = 0 level, AD does not read that from its context, whatever its own
exploration finds.

    python benchmarks/metaworld_prompted.py --config configs/metaworld/prompted_search_gaussian.yaml
    python benchmarks/metaworld_prompted.py --quick    # a tiny demo run (metaworld_ad --quick), then this on it
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import fail, figure, merge_report, parse_args  # noqa: E402

CAPABILITY = "Meta-World ML1 in context"


class PromptedPolicy:
    """An in-context policy whose context starts with given transitions: :meth:`reset` feeds ``prompt`` (states
    (E, T, D), actions (E, T, A), rewards (E, T), timesteps (E, T)) through the policy, teacher-forced, and the
    first real step continues from its last transition instead of starting a new context."""

    def __init__(self, policy: Any, prompt: dict[str, np.ndarray]):
        self.policy, self.prompt, self.pending = policy, prompt, None

    def reset(self, num_envs: int) -> None:
        import torch

        self.policy.reset(num_envs)
        states, actions = self.prompt["states"], self.prompt["actions"]
        if not states.shape[1]:
            return
        prev_a = torch.zeros((num_envs, actions.shape[-1]), dtype=torch.float32)
        prev_r = torch.zeros(num_envs, dtype=torch.float32)
        first = torch.ones(num_envs, dtype=torch.bool)
        for t in range(states.shape[1]):
            self.policy.act(torch.from_numpy(states[:, t]), prev_a, prev_r,
                            torch.from_numpy(self.prompt["timesteps"][:, t]), first)
            prev_a, prev_r = torch.from_numpy(actions[:, t]), torch.from_numpy(self.prompt["rewards"][:, t])
            first = torch.zeros_like(first)
        self.pending = (prev_a, prev_r)

    def act(self, obs, prev_action, prev_reward, timestep, first):
        if self.pending is not None:  # the env's first step: the context goes on from the prompt's last transition
            (prev_action, prev_reward), self.pending = self.pending, None
            first = first.clone().fill_(False)
        return self.policy.act(obs, prev_action, prev_reward, timestep, first)


def source_episodes(reader: Any, tasks: list[str], stream: int) -> list[Any]:
    """One stream (``stream``: its index among the task's streams) of each task, in task order."""
    out = []
    for task in tasks:
        streams = reader.streams(tasks=[task])
        if stream >= len(streams):
            fail(f"task {task} has {len(streams)} streams; pass --stream below that")
        out.append(streams[stream])
    return out


def prompt_of(streams: list[Any], k: int) -> dict[str, np.ndarray]:
    """The first ``k`` episodes of each stream, stacked (every stream's episodes have the same length here)."""
    rows = [np.flatnonzero(s.columns["episode"] < k) for s in streams]
    if len({len(r) for r in rows}) != 1:
        fail(f"the held-out streams' first {k} episodes differ in length; this diagnostic needs equal ones")
    take = lambda name: np.stack([s.columns[name][r] for s, r in zip(streams, rows)])  # noqa: E731
    return {"states": take("state").astype(np.float32), "actions": take("action").astype(np.float32),
            "rewards": take("reward").astype(np.float32), "timesteps": take("step").astype(np.int64)}


def source_success(streams: list[Any], episode: int) -> float:
    """The source's success rate in its ``episode`` (0-based) over the streams (any successful step counts)."""
    hits = [bool(s.columns["success"][s.columns["episode"] == episode].any()) for s in streams]
    return float(np.mean(hits))


def run_folder(folder: Path, prompts: list[int], episodes: int, stream: int, seed: int) -> dict[str, Any]:
    """AD of one ``ad demo --task metaworld`` run folder, prompted with 0.. episodes of the source: success per
    episode after each prompt, and the source's own success in the same episodes."""
    from ad.commands.evaluate import pick_tasks
    from ad.evaluate import run_in_context
    from ad.history import HistoryReader
    from ad.registry import env_factory, load_policy
    import tasks.metaworld  # noqa: F401  (registers the family)

    reader = HistoryReader(str(folder / "metaworld"))
    tasks = pick_tasks(reader, "heldout", None)
    streams = source_episodes(reader, tasks, stream)
    out: dict[str, Any] = {"tasks": len(tasks), "by_prompt": {}}
    setup = env_factory(reader.family)(reader.metadata, tasks, 1)  # one set of envs; each run resets it with `seed`
    try:
        for k in prompts:  # a freshly loaded policy each time: its sampling does not depend on the runs before
            policy = PromptedPolicy(load_policy(str(folder / "ad"), greedy=False, seed=seed), prompt_of(streams, k))
            result = run_in_context(policy, setup, episodes, seed, f"AD after {k} source episodes", progress=False)
            ad = result.extra["success"].reshape(len(tasks), episodes).mean(0)
            source = [source_success(streams, k + e) for e in range(episodes)]
            out["by_prompt"][k] = {"ad": ad.tolist(), "source": source,
                                   "ad_return": result.returns.mean((0, 1)).tolist()}
            print(f"{folder.name}: after {k} source episodes, AD success {np.round(ad, 2).tolist()}, the source's "
                  f"own {np.round(source, 2).tolist()}", flush=True)
    finally:
        setup.env.close()
    return out


def plot(per_seed: dict[int, dict[str, Any]], path: Path) -> None:
    """AD's success in its first episode after k source episodes, and the source's own in that episode, by k."""
    from ad.plots import finish_rate_panel, pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(per_seed), figsize=(5.2 * len(per_seed), 3.8), squeeze=False)
    for ax, (seed, run) in zip(axes[0], per_seed.items()):
        ks = sorted(run["by_prompt"], key=int)
        ax.set_xticks([int(k) for k in ks])
        ax.plot(ks, [run["by_prompt"][k]["ad"][0] for k in ks], marker="o", lw=2, label="AD, context = the source's k")
        ax.plot(ks, [run["by_prompt"][k]["source"][0] for k in ks], marker="s", ls="--", label="the source itself")
        finish_rate_panel(ax, "source episodes in AD's context before it acts (k)", "success rate in the next episode",
                          f"held-out goals, seed {seed}")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny demo run (metaworld_ad --quick), then this on it")
    parser.add_argument("--work", default="data/bench-metaworld-ad-search-gaussian",
                        help="folder of finished metaworld_ad runs (seed<N> each: AD's run in ad/, the histories "
                             "in metaworld/)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="the runs (seed<N> folders) to read")
    parser.add_argument("--prompts", type=int, nargs="+", default=[0, 1, 2, 3],
                        help="numbers of the source's first episodes put in AD's context before it acts")
    parser.add_argument("--episodes", type=int, default=2, help="episodes AD acts after each prompt")
    parser.add_argument("--stream", type=int, default=0, help="which of each goal's source streams is the prompt")
    parser.add_argument("--variant", default="search-gaussian", help="name of the runs in the figures and the plot")
    args = parse_args(parser)
    if args.episodes < 1 or args.stream < 0 or min(args.prompts) < 0:
        fail("--episodes must be >= 1, --stream and every --prompts value >= 0")
    for seed in [] if args.quick else args.seeds:
        for part in ("ad", "metaworld"):
            if not (Path(args.work) / f"seed{seed}" / part).is_dir():
                fail(f"{Path(args.work) / f'seed{seed}' / part} does not exist: run the metaworld_ad config whose runs "
                     "--work names first")
    if args.quick:  # a tiny demo run (metaworld_ad's --quick settings, the noisy expert) in a temporary folder
        import tempfile

        from benchmarks.metaworld_ad import QUICK, run_seed

        args.work, args.seeds, args.prompts, args.episodes = tempfile.mkdtemp(), [0], [0, 1], 1
        args.variant = "quick"
        run_seed({**QUICK, "seed": 0}, Path(args.work) / "seed0")
    per_seed = {seed: run_folder(Path(args.work) / f"seed{seed}", args.prompts, args.episodes, args.stream, seed)
                for seed in args.seeds}
    figures = []
    for seed, run in per_seed.items():
        for k, row in run["by_prompt"].items():
            fig = figure(f"Meta-World ML1 reach ({args.variant}), seed {seed}: AD's success rate in its first "
                         f"episode after {k} of the source's own episodes in its context, {run['tasks']} held-out "
                         f"goals, vs the source's own in that episode", "success rate", row["ad"][0],
                         row["source"][0], "diagnostic (no goal)")
            fig.update(seed=seed, prompt_episodes=k, ad_success=row["ad"], source_success=row["source"],
                       variant=args.variant)
            figures.append(fig)
    png = "metaworld_prompted_quick.png" if args.quick else f"metaworld_prompted_{args.variant}.png"
    plot(per_seed, Path(__file__).resolve().parent / "results" / png)
    merge_report("metaworld_prompted", args.quick, args.variant, figures, page="metaworld", capability=CAPABILITY)


if __name__ == "__main__":
    main()
