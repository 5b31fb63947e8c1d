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

    python benchmarks/dpt_calibration_rooms.py --config configs/keydoor/dpt_calibration.yaml
"""
from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, merge_report, parse_args  # noqa: E402
from benchmarks.in_context_methods import CAPABILITY  # noqa: E402

#: Posterior-probability bins of the calibration table.
BINS = (0.0, 0.05, 0.15, 0.3, 0.5, 0.7, 0.85, 1.0001)


def fail(message: str) -> None:
    """End with one ``error:`` line and exit status 2 (bad input), no traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


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


def hidden_phase(family: str, task: str, columns: dict[str, np.ndarray]) -> list[tuple[int, np.ndarray]]:
    """[(row, the cells the hidden cell may be before that row's action)] over the first episode's rows where the
    hidden cell is unknown: DarkRoom's goal before it is reached; Key-to-Door's door after the key, before the door.
    The cells it may be: all but those the phase has visited (its current cell included) and, for the door, the
    key."""
    size, hidden, excluded = hidden_cell(family, task)
    state = np.asarray(columns["state"], dtype=np.int64)
    reward = np.asarray(columns["reward"], dtype=np.float64)
    episode = np.asarray(columns["episode"])
    rows = np.flatnonzero(episode == episode[0])  # the first episode
    start = rows[0]
    if family == "keydoor":
        rewarded = rows[reward[rows] > 0]
        if not len(rewarded):
            return []  # the key was never taken: no door search
        start = rewarded[0] + 1  # the first row acted from the key's cell
    cells = np.arange(size * size)
    out, visited = [], set(excluded)
    for row in rows[rows >= start]:
        visited.add(int(state[row]))
        if state[row] == hidden:
            break
        may = np.setdiff1d(cells, list(visited))
        if not len(may):
            break
        out.append((int(row), may))
        if reward[row] > 0 and family == "darkroom":
            break
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


def record(run: Path, family: str, out: Path, seeds: int, seed: int, threads: int) -> Path:
    """DPT's first episode on every held-out task, ``seeds`` runs each (``ad eval --record``); read back if done."""
    folder = out / "record"
    if not (folder / "dataset.json").is_file():
        subprocess.run([sys.executable, "-m", "ad", "eval", "--ckpt", str(run / "dpt"), "--name", "DPT", "--data",
                        str(run / family), "--episodes", "1", "--seeds", str(seeds), "--seed", str(seed),
                        "--record", str(folder),
                        "--out", str(out / "eval"), "--threads", str(threads), "--progress", "false"], check=True)
    return folder


def measure(run: Path, recorded: Path, family: str) -> dict[str, Any]:
    """Predicted vs posterior action probabilities over the hidden-cell phase of every recorded episode."""
    import torch

    from ad.formats.rl import build_window_source
    from ad.history import HistoryReader
    from models.rl.loader import model_dir
    from models.rl.model import ADTransformer

    model = ADTransformer.from_pretrained(model_dir(run / "dpt")).eval()
    A = model.config.num_actions
    size = int(round(model.config.num_states ** 0.5))
    edge = np.array([on_edge(size, cell) for cell in range(size * size)])
    predicted, posterior, prior, edge_steps = [], [], [], []
    for stream in HistoryReader(recorded).streams():
        phase = hidden_phase(family, stream.task, stream.columns)
        if not phase:
            continue
        batch = build_window_source([stream], len(stream.columns["episode"])).gather([0])
        with torch.no_grad():
            logits = model(*(torch.as_tensor(batch[k]) for k in ("states", "actions", "rewards", "timesteps")))
        probs = torch.softmax(logits["action"][0].float(), -1).numpy()  # (T, A)
        state = np.asarray(stream.columns["state"], dtype=np.int64)
        first_cells = phase[0][1]  # the cells it may be at the phase's start: the cell-only prior's, but for `at`
        for row, cells in phase:
            at = int(state[row])
            predicted.append(probs[row])
            posterior.append(action_marginal(size, cells, at, A))
            prior.append(action_marginal(size, first_cells[first_cells != at], at, A))
            edge_steps.append(edge[at])
    if not predicted:
        fail(f"no recorded episode of {recorded} reached the hidden-cell phase")
    P, Q, R = np.array(predicted), np.array(posterior), np.array(prior)  # (N, A) each
    calibration = []
    for lo, hi in zip(BINS[:-1], BINS[1:]):
        m = (Q >= lo) & (Q < hi)
        if m.sum():
            calibration.append({"posterior_from": lo, "posterior_to": min(hi, 1.0), "n": int(m.sum()),
                                "posterior": float(Q[m].mean()), "predicted": float(P[m].mean())})
    return {"positions": len(P), "tv_to_posterior": float(0.5 * np.abs(P - Q).sum(1).mean()),
            "tv_prior_to_posterior": float(0.5 * np.abs(R - Q).sum(1).mean()),
            "tv_to_prior": float(0.5 * np.abs(P - R).sum(1).mean()),
            "edge_share": float(np.mean(edge_steps)), "edge_cells_share": float(edge.mean()),
            "calibration": calibration}


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
    parser.add_argument("--eval-seeds", type=int, default=10, help="recorded first episodes per held-out task")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the recording")
    parser.add_argument("--evaluation", default="",
                        help="also split DPT's return / optimal at episodes 36-40 of this evaluation folder of each "
                             "run (e.g. eval-sampling-episode) by whether the hidden cell is on the room's edge")
    parser.add_argument("--variant", default="keydoor-dpt-context-400-subsample-20-18k",
                        help="name of the runs in the figures and the plot")
    args = parse_args(parser)
    if args.family not in ("darkroom", "keydoor"):
        fail(f"--family {args.family!r}: this diagnostic knows the posterior of darkroom and keydoor only")
    if args.eval_seeds < 1:
        fail("--eval-seeds must be at least 1")
    runs = {seed: Path(f"{args.runs}-seed{seed}") for seed in args.seeds}
    for run in runs.values():
        check_run(run, args.family)
    per_seed = {}
    for seed, run in runs.items():
        out = run / "dpt-calibration"
        per_seed[seed] = m = measure(run, record(run, args.family, out, args.eval_seeds, seed, args.threads),
                                     args.family)
        print(f"seed {seed}: {m['positions']} steps; TV(DPT, posterior) {m['tv_to_posterior']:.3f}, TV(cell-only "
              f"prior, posterior) {m['tv_prior_to_posterior']:.3f}, TV(DPT, prior) {m['tv_to_prior']:.3f}; on edge "
              f"cells {m['edge_share']:.3f} of the steps ({m['edge_cells_share']:.3f} of the cells)", flush=True)
        for b in m["calibration"]:
            print(f"   posterior {b['posterior_from']:.2f}-{b['posterior_to']:.2f} (n {b['n']}): mean posterior "
                  f"{b['posterior']:.3f}, predicted {b['predicted']:.3f}")
        if args.evaluation:
            m["by_edge"] = edges = by_edge(run, args.family, args.evaluation)
            print(f"   {args.evaluation}, episodes 36-40: hidden cell on the edge {edges['edge_36_40']:.3f} "
                  f"({edges['edge_tasks']} tasks), inside {edges['inside_36_40']:.3f} ({edges['inside_tasks']})")
        (out / "calibration.json").write_text(json.dumps(m, indent=2))
    figures = []
    for seed, m in per_seed.items():
        fig = figure(f"{args.variant}, seed {seed}: total-variation distance of DPT's predicted optimal-action "
                     "probabilities from the exact posterior over the hidden-cell phase of its first episode on the "
                     "held-out tasks, vs the cell-only prior's distance from it", "total variation",
                     m["tv_to_posterior"], m["tv_prior_to_posterior"], "diagnostic (no goal)", higher_is_better=False)
        fig.update(seed=seed, variant=args.variant, **{k: v for k, v in m.items() if k != "tv_to_posterior"})
        figures.append(fig)
    plot(per_seed, args.variant, RESULTS / f"dpt_calibration_{args.variant}.png")
    merge_report("dpt_calibration", False, args.variant, figures, capability=CAPABILITY, page="in-context-methods")


if __name__ == "__main__":
    main()
