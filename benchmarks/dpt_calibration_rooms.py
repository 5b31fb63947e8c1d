"""DPT against the exact posterior in the grid rooms (DarkRoom, Key-to-Door), as ``dpt_calibration.py`` does on
bandits: the posterior over the hidden cell is known exactly, so DPT's predicted probabilities of the optimal action
can be checked against it, step by step.

DPT is trained to predict the optimal action of a query state given a context; its prediction is then the
*posterior marginal* of the optimal action: the share of the cells the hidden cell may still be (given the context)
from which the family's shortest-path rule takes each action. In a trained DPT's own first episode on each held-out
task (``ad eval --episodes 1 --record``), over the steps where the hidden cell is still unknown (DarkRoom: before the
goal is reached; Key-to-Door: after the key is taken, before the door), the cells it may be are every cell the
episode has not visited in that phase (the goal or door is uniform over the cells of the room in the family's task
draw; Key-to-Door: not on the key). This script teacher-forces the model on its recorded episodes and reports the
total-variation distance between its predicted action probabilities (temperature 1) and that posterior, beside the
distance of the *cell-only prior* (the same rule with no cell visited yet: what a model that ignores its context
could at best predict) from the posterior; a calibration table (the predicted probability of an action, binned by
its posterior probability); and the share of the phase's steps spent on the room's edge cells.

With ``--episodes N`` the recorded runs go on for N episodes in context, and each step is predicted from the
context window ``ad eval`` acted from (it keeps the newest half of a full window): over the later episodes' steps
where the window does not show the hidden cell found, the posterior excludes the cells searched in the phase anywhere
in the window, earlier episodes included; its distance from DPT's prediction is reported beside DPT's distance from
the posterior of the step's own episode alone (what a model that reads only its current episode would predict), from
the cell-only prior, and from the same rule over the cells already searched in the window (what a model that heads
back to where it has been would predict); where the window does show the hidden cell found, DPT's probability of
the shortest-path action to it.

    python benchmarks/dpt_calibration_rooms.py --config configs/keydoor/dpt_calibration.yaml
"""
from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, fail, figure, merge_report, parse_args  # noqa: E402
from benchmarks.in_context_methods import CAPABILITY  # noqa: E402

#: Posterior-probability bins of the calibration table.
BINS = (0.0, 0.05, 0.15, 0.3, 0.5, 0.7, 0.85, 1.0001)


def hidden_cell(family: str, task: str) -> tuple[int, int, set[int]]:
    """(room side, the hidden cell, the cells it cannot be) of a task: DarkRoom's goal; Key-to-Door's door (not on
    the key)."""
    if family == "darkroom":
        from tasks.darkroom.goals import parse_task_name

        size, (r, c) = parse_task_name(task)
        return size, r * size + c, set()
    if family == "keydoor":
        from tasks.keydoor.pairs import parse_task_name

        size, (kr, kc, dr, dc) = parse_task_name(task)
        return size, dr * size + dc, {kr * size + kc}
    fail(f"family {family!r}: this diagnostic knows the posterior of darkroom and keydoor only")
    raise AssertionError  # fail exits


@dataclass
class Step:
    """One step of a recorded run where DPT's prediction is compared: its ``row``, the first row of the context
    window DPT acted from (``window``), its ``episode`` (0 = the run's first) and, where the hidden cell is unknown
    in that window, the cells it may be given the window (``may``) and given the step's own episode only
    (``may_in_episode``); ``may`` is None where the window shows the hidden cell found. ``prior``: the cells of the
    cell-only prior, all the hidden cell may be but the phase's first cell in the episode (none searched yet)."""

    row: int
    window: int
    episode: int
    may: np.ndarray | None
    may_in_episode: np.ndarray | None
    prior: np.ndarray | None = None


def window_start(row: int, context: int) -> int:
    """The first row of the context window ``ad eval`` acts from at ``row``: the window fills up to ``context``
    transitions and then keeps its newest ``context // 2`` (:mod:`models.rl.policy`), so it starts at a multiple of
    ``context // 2``."""
    half = context // 2
    return 0 if row < context else ((row - context) // half + 1) * half


def search_steps(family: str, task: str, columns: dict[str, np.ndarray], context: int,
                 episodes: int = 1) -> list[Step]:
    """The steps of a recorded run's first ``episodes`` episodes in the hidden cell's phase (DarkRoom: every step;
    Key-to-Door: with the key carried, i.e. after the episode's first reward), each with the cells the hidden cell
    may be given the transitions of DPT's context window at that step: all but the cells visited in the phase
    within the window (the step's own cell included) and, for the door, the key; a step whose window shows the
    hidden cell found (a reward of the phase: DarkRoom's any, Key-to-Door's door) has ``may`` None. A step with no
    cell left is dropped."""
    size, hidden, excluded = hidden_cell(family, task)
    state = np.asarray(columns["state"], dtype=np.int64)
    reward = np.asarray(columns["reward"], dtype=np.float64)
    episode = np.asarray(columns["episode"])
    ordinal = np.cumsum(np.diff(episode, prepend=episode[:1]) != 0)  # (N,) the run's episode 0, 1, ...
    rewarded = reward > 0
    earlier = np.zeros(len(state), np.int64)  # rewards earlier in the same episode
    for e in np.unique(ordinal):
        rows = np.flatnonzero(ordinal == e)
        earlier[rows] = np.cumsum(rewarded[rows]) - rewarded[rows]
    in_phase = earlier > 0 if family == "keydoor" else np.ones(len(state), bool)
    found = rewarded & in_phase  # a step that reaches the hidden cell
    cells = np.arange(size * size)
    out, first_cell = [], {}
    for row in np.flatnonzero(in_phase & (ordinal < episodes)):
        first_cell.setdefault(int(ordinal[row]), int(state[row]))
        lo = window_start(int(row), context)
        if state[row] == hidden:
            continue
        if found[lo:row].any():
            out.append(Step(int(row), lo, int(ordinal[row]), None, None))
            continue
        seen = np.arange(lo, row + 1)
        seen = seen[in_phase[seen]]
        own = seen[ordinal[seen] == ordinal[row]]
        may = np.setdiff1d(cells, [*excluded, *state[seen].tolist()])
        if len(may):
            out.append(Step(int(row), lo, int(ordinal[row]), may,
                            np.setdiff1d(cells, [*excluded, *state[own].tolist()]),
                            np.setdiff1d(cells, [*excluded, first_cell[int(ordinal[row])], int(state[row])])))
    return out


@functools.lru_cache(maxsize=None)
def shortest_path_table(size: int) -> np.ndarray:
    """(S, S) int64: ``[target, cell]`` the family's shortest-path action from ``cell`` towards ``target``."""
    from tasks.grid.room import shortest_path_actions

    return np.stack([shortest_path_actions(size, target) for target in range(size * size)])


def on_edge(size: int, cell: int) -> bool:
    """Whether ``cell`` is on the room's outer rows or columns."""
    r, c = divmod(int(cell), size)
    return r in (0, size - 1) or c in (0, size - 1)


def action_marginal(size: int, cells: np.ndarray, at: int, num_actions: int) -> np.ndarray:
    """(A,) share of ``cells`` from which the family's shortest-path rule takes each action at cell ``at``."""
    actions = shortest_path_table(size)[np.asarray(cells, dtype=np.int64), at]
    return np.bincount(actions, minlength=num_actions) / len(cells)


def check_run(run: Path, family: str) -> None:
    for part in ("dpt", family):
        if not (run / part).is_dir():
            fail(f"{run / part} does not exist: --runs names finished `ad demo --methods ...,dpt` folders "
                 f"(with dpt/ and {family}/)")


def record(run: Path, family: str, out: Path, seeds: int, seed: int, threads: int, episodes: int = 1,
           sampling: str = "step") -> Path:
    """DPT's first ``episodes`` episodes in context on every held-out task, ``seeds`` runs each, actions sampled at
    temperature 1 by the ``sampling`` rule (``ad eval --record``); read back if done."""
    name = "record" if (episodes, sampling) == (1, "step") else f"record-{episodes}-episodes-sampling-{sampling}"
    folder = out / name
    if not (folder / "dataset.json").is_file():
        subprocess.run([sys.executable, "-m", "ad", "eval", "--ckpt", str(run / "dpt"), "--name", "DPT", "--data",
                        str(run / family), "--episodes", str(episodes), "--seeds", str(seeds), "--seed", str(seed),
                        "--sampling", sampling, "--record", str(folder),
                        "--out", str(out / ("eval" if name == "record" else f"eval-{name}")),
                        "--threads", str(threads), "--progress", "false"], check=True)
    return folder


def measure(run: Path, recorded: Path, family: str, episodes: int = 1) -> dict[str, Any]:
    """Predicted vs posterior action probabilities at the steps of the recorded runs' first ``episodes`` episodes
    (:func:`search_steps`), each predicted from the context window ``ad eval`` acted from: over the first episode's
    steps where the hidden cell is unknown (the calibration table and the cell-only prior's distance too), over the
    later episodes' such steps (also against the posterior of the step's own episode alone), and where the window
    shows the hidden cell found (the predicted probability of the shortest-path action to it)."""
    import torch

    from ad.formats.rl import build_window_source
    from ad.history import HistoryReader, Stream
    from models.rl.loader import model_dir
    from models.rl.model import ADTransformer

    model = ADTransformer.from_pretrained(model_dir(run / "dpt")).eval()
    A, context = model.config.num_actions, model.config.context
    size = int(round(model.config.num_states ** 0.5))
    edge = np.array([on_edge(size, cell) for cell in range(size * size)])
    first: dict[str, list] = {"P": [], "Q": [], "R": [], "edge": []}
    later: dict[str, list] = {"P": [], "Q": [], "E": [], "R": [], "edge": []}
    back: dict[str, list] = {"P": [], "S": []}  # later steps with a searched cell besides the step's own
    known = []  # predicted probability of the shortest-path action to the hidden cell, where the window shows it
    for stream in HistoryReader(recorded).streams():
        steps = search_steps(family, stream.task, stream.columns, context, episodes)
        state = np.asarray(stream.columns["state"], dtype=np.int64)
        hidden = hidden_cell(family, stream.task)[1]
        by_window: dict[int, list[Step]] = {}
        for step in steps:
            by_window.setdefault(step.window, []).append(step)
        for lo, window_steps in sorted(by_window.items()):
            part = Stream(stream.task, stream.run, stream.stream,
                          {k: v[lo:lo + context] for k, v in stream.columns.items()})
            batch = build_window_source([part], len(part)).gather([0])
            with torch.no_grad():
                logits = model(*(torch.as_tensor(batch[k]) for k in ("states", "actions", "rewards", "timesteps")))
            probs = torch.softmax(logits["action"][0].float(), -1).numpy()  # (T, A) of this window
            for step in window_steps:
                at, p = int(state[step.row]), probs[step.row - lo]
                if step.may is None:
                    known.append(p[shortest_path_table(size)[hidden, at]])
                elif step.episode == 0:
                    first["P"].append(p), first["Q"].append(action_marginal(size, step.may, at, A))
                    first["R"].append(action_marginal(size, step.prior, at, A)), first["edge"].append(edge[at])
                else:
                    later["P"].append(p), later["Q"].append(action_marginal(size, step.may, at, A))
                    later["E"].append(action_marginal(size, step.may_in_episode, at, A))
                    later["R"].append(action_marginal(size, step.prior, at, A))
                    searched = np.setdiff1d(step.prior, step.may)  # searched in the window, but not here
                    if len(searched):
                        back["P"].append(p), back["S"].append(action_marginal(size, searched, at, A))
                    later["edge"].append(edge[at])
    if not first["P"]:
        fail(f"no recorded episode of {recorded} reached the hidden-cell phase")
    P, Q, R = (np.array(first[k]) for k in "PQR")  # (N, A) each
    calibration = []
    for lo, hi in zip(BINS[:-1], BINS[1:]):
        m = (Q >= lo) & (Q < hi)
        if m.sum():
            calibration.append({"posterior_from": lo, "posterior_to": min(hi, 1.0), "n": int(m.sum()),
                                "posterior": float(Q[m].mean()), "predicted": float(P[m].mean())})
    out = {"positions": len(P), "tv_to_posterior": tv(P, Q), "tv_prior_to_posterior": tv(R, Q), "tv_to_prior": tv(P, R),
           "edge_share": float(np.mean(first["edge"])), "edge_cells_share": float(edge.mean()),
           "calibration": calibration, "episodes": episodes}
    if later["P"]:
        P, Q, E, R = (np.array(later[k]) for k in "PQER")
        out.update(later_positions=len(P), later_tv_to_posterior=tv(P, Q), later_tv_to_episode_posterior=tv(P, E),
                   later_tv_episode_posterior_to_posterior=tv(E, Q), later_tv_to_prior=tv(P, R),
                   later_tv_prior_to_posterior=tv(R, Q), later_edge_share=float(np.mean(later["edge"])))
    if back["P"]:
        out.update(later_tv_to_searched=tv(np.array(back["P"]), np.array(back["S"])))
    if known:
        out.update(known_positions=len(known), known_optimal_probability=float(np.mean(known)))
    return out


def tv(p: np.ndarray, q: np.ndarray) -> float:
    """Mean total-variation distance between the rows of two (N, A) arrays of distributions."""
    return float(0.5 * np.abs(p - q).sum(1).mean())


def by_edge(run: Path, family: str, evaluation: str) -> dict[str, Any]:
    """DPT's return / optimal at in-context episodes 36-40 in ``run``/``evaluation``/eval.json, on the held-out tasks
    whose hidden cell (DarkRoom's goal, Key-to-Door's door) is on the room's edge and on those inside."""
    file = run / evaluation / "eval.json"
    if not file.is_file():
        fail(f"{file} does not exist: --evaluation names an evaluation folder of the runs (eval, "
             "eval-sampling-episode ...)")
    result = json.loads(file.read_text())
    returns = np.asarray(result["policies"]["DPT"]["returns"], dtype=np.float64)  # (tasks, seeds, episodes)
    if returns.shape[-1] < 40:
        fail(f"{file} holds {returns.shape[-1]} episodes in context; episodes 36-40 need 40")
    tasks = json.loads((run / family / "dataset.json").read_text())["tasks"]
    optimum = np.array([tasks[task]["optimal_return"] for task in result["tasks"]], dtype=np.float64)  # (tasks,)
    late = returns[:, :, 35:40].mean(axis=(1, 2)) / optimum
    edge = np.array([on_edge(size, hidden) for size, hidden, _ in (hidden_cell(family, t) for t in result["tasks"])])
    return {"evaluation": evaluation, "edge_tasks": int(edge.sum()), "inside_tasks": int((~edge).sum()),
            "edge_36_40": float(late[edge].mean()) if edge.any() else None,
            "inside_36_40": float(late[~edge].mean()) if (~edge).any() else None}


def plot(per_seed: dict[int, dict[str, Any]], title: str, path: Path) -> None:
    """Predicted vs posterior probability of an action, binned by the posterior, one panel per seed."""
    from ad.plots import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(per_seed), figsize=(4.6 * len(per_seed), 4.2), squeeze=False)
    for ax, (seed, m) in zip(axes[0], per_seed.items()):
        x = [b["posterior"] for b in m["calibration"]]
        ax.plot([0, 1], [0, 1], color="grey", ls="--", lw=1, label="the posterior")
        ax.plot(x, [b["predicted"] for b in m["calibration"]], marker="o", lw=2, label="DPT's prediction")
        ax.set_xlabel("posterior probability of an action (binned)")
        ax.set_ylabel("DPT's predicted probability (mean)")
        ax.set_title(f"{title}, seed {seed}\nTV to the posterior {m['tv_to_posterior']:.3f}", fontsize=9)
        ax.set_xlim(0, 1), ax.set_ylim(0, 1), ax.legend(fontsize=8)
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="keydoor", help="darkroom or keydoor: the family of the runs")
    parser.add_argument("--runs", default="data/bench-in-context-methods/keydoor-dpt-context-400-subsample-20-18k",
                        help="the runs: <runs>-seed<N> folders of finished `ad demo --methods ...,dpt` runs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="the runs' seeds (their held-out splits)")
    parser.add_argument("--eval-seeds", type=int, default=10, help="recorded runs per held-out task")
    parser.add_argument("--episodes", type=int, default=1,
                        help="episodes in context per recorded run; beyond the first, the later episodes' steps are "
                             "compared with the posterior given DPT's context window too")
    parser.add_argument("--sampling", default="step", choices=("step", "episode"),
                        help="how the recorded runs sample DPT's actions (ad eval --sampling)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the recording")
    parser.add_argument("--evaluation", default="",
                        help="also split DPT's return / optimal at episodes 36-40 of this evaluation folder of each "
                             "run (e.g. eval-sampling-episode) by whether the hidden cell is on the room's edge")
    parser.add_argument("--variant", default="keydoor-dpt-context-400-subsample-20-18k",
                        help="name of the runs in the figures and the plot")
    args = parse_args(parser)
    if args.family not in ("darkroom", "keydoor"):
        fail(f"--family {args.family!r}: this diagnostic knows the posterior of darkroom and keydoor only")
    if args.eval_seeds < 1 or args.episodes < 1:
        fail("--eval-seeds and --episodes must be at least 1")
    runs = {seed: Path(f"{args.runs}-seed{seed}") for seed in args.seeds}
    for run in runs.values():
        check_run(run, args.family)
    per_seed = {}
    for seed, run in runs.items():
        out = run / "dpt-calibration"
        recorded = record(run, args.family, out, args.eval_seeds, seed, args.threads, args.episodes, args.sampling)
        per_seed[seed] = m = measure(run, recorded, args.family, args.episodes)
        print(f"seed {seed}: {m['positions']} steps; TV(DPT, posterior) {m['tv_to_posterior']:.3f}, TV(cell-only "
              f"prior, posterior) {m['tv_prior_to_posterior']:.3f}, TV(DPT, prior) {m['tv_to_prior']:.3f}; on edge "
              f"cells {m['edge_share']:.3f} of the steps ({m['edge_cells_share']:.3f} of the cells)", flush=True)
        for b in m["calibration"]:
            print(f"   posterior {b['posterior_from']:.2f}-{b['posterior_to']:.2f} (n {b['n']}): mean posterior "
                  f"{b['posterior']:.3f}, predicted {b['predicted']:.3f}")
        if "later_positions" in m:
            print(f"   episodes 2-{args.episodes}: {m['later_positions']} steps with the hidden cell unknown in the "
                  f"window; TV(DPT, posterior) {m['later_tv_to_posterior']:.3f}, TV(DPT, the posterior of the step's "
                  f"episode alone) {m['later_tv_to_episode_posterior']:.3f}, TV(that, posterior) "
                  f"{m['later_tv_episode_posterior_to_posterior']:.3f}, TV(DPT, cell-only prior) "
                  f"{m['later_tv_to_prior']:.3f}, TV(cell-only prior, posterior) "
                  f"{m['later_tv_prior_to_posterior']:.3f}, TV(DPT, the cells already searched in the window) "
                  f"{m.get('later_tv_to_searched', float('nan')):.3f}; on edge cells {m['later_edge_share']:.3f}")
        if "known_positions" in m:
            print(f"   {m['known_positions']} steps with the hidden cell found in the window: DPT's probability of "
                  f"the shortest-path action to it {m['known_optimal_probability']:.3f}")
        if args.evaluation:
            m["by_edge"] = edges = by_edge(run, args.family, args.evaluation)
            print(f"   {args.evaluation}, episodes 36-40: hidden cell on the edge {edges['edge_36_40']:.3f} "
                  f"({edges['edge_tasks']} tasks), inside {edges['inside_36_40']:.3f} ({edges['inside_tasks']})")
        name = "calibration.json" if args.episodes == 1 else f"calibration-{args.episodes}-episodes.json"
        (out / name).write_text(json.dumps(m, indent=2))
    figures = []
    for seed, m in per_seed.items():
        fig = figure(f"{args.variant}, seed {seed}: total-variation distance of DPT's predicted optimal-action "
                     "probabilities from the exact posterior over the hidden-cell phase of its first episode on the "
                     "held-out tasks, vs the cell-only prior's distance from it", "total variation",
                     m["tv_to_posterior"], m["tv_prior_to_posterior"], "diagnostic (no goal)", higher_is_better=False)
        fig.update(seed=seed, variant=args.variant, **{k: v for k, v in m.items() if k != "tv_to_posterior"})
        figures.append(fig)
        if "later_positions" in m:
            later = figure(f"{args.variant}, seed {seed}: total-variation distance of DPT's predicted optimal-action "
                           "probabilities from the exact posterior given its context window, over the steps of "
                           f"in-context episodes 2-{args.episodes} whose window does not show the hidden cell found, "
                           "vs its distance from the posterior of the step's own episode alone", "total variation",
                           m["later_tv_to_posterior"], m["later_tv_to_episode_posterior"], "diagnostic (no goal)",
                           higher_is_better=False)
            later.update(seed=seed, variant=args.variant, sampling=args.sampling)
            figures.append(later)
    plot(per_seed, args.variant, RESULTS / f"dpt_calibration_{args.variant}.png")
    merge_report("dpt_calibration", False, args.variant, figures, capability=CAPABILITY, page="in-context-methods")


if __name__ == "__main__":
    main()
