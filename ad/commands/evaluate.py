"""`ad eval`: in-context evaluation of trained policies on held-out tasks, against the baselines."""
from __future__ import annotations

import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ad.files import check_output_folder, write_json_atomic, write_text_atomic
from ad.config import option, override, refuse
from ad.errors import UserError
from ad.config.memory import check_memory
from ad.config.groups import RunOptions, SamplingOptions, SamplingRuleOptions, run_options
from ad.registry import action_order, default_dataset, env_factory, load_policy, register, task_kwargs

#: Labels of the rows the evaluator adds itself (uniformly random actions, the source algorithm's own curve).
RESERVED_LABELS = ("random", "source")


@dataclass
class EvalConfig(SamplingOptions, SamplingRuleOptions, run_options("out", "seed", "threads", "progress")):
    """Run trained models in context on held-out tasks; write eval.json, eval.csv and in_context.png."""

    ckpt: str = option("runs/ad", "run folder of `ad train` (the AD model)")
    data: str | None = option(None, "dataset the tasks and the source curve come from (default: the one `ad generate` "
                                    "writes for the default task family)")
    baseline: str | None = option(None, "run folder of a second model to compare, e.g. the expert-distillation one")
    baseline_name: str = option("ED", "label of --baseline in the table and plot")
    name: str = option("AD", "label of --ckpt in the table and plot")
    models: list[str] = option([], "more trained models to compare, each LABEL=RUN_FOLDER (e.g. DPT=runs/dpt)")
    episodes: int = option(100, "episodes in context per env (the AD paper used up to 1000)")
    seeds: int = option(3, "evaluation seeds (parallel envs) per task")
    split: str = option("heldout", "which tasks: heldout, train or all")
    max_tasks: int | None = option(None, "evaluate at most this many of the tasks (default: all of them)")
    greedy: bool = option(False, "greedy actions instead of sampling from the policy (Box actions: the Gaussian "
                                 "head's squashed mean, or each dimension's most likely bin)")
    out: str | None = override(RunOptions, "out", None, "eval.json, eval.csv and in_context.png (default: "
                                                        "<ckpt>/eval)")
    record: str | None = option(None, "also write the --ckpt model's in-context runs to this folder as a "
                                      "learning-history dataset (the evaluated dataset's family, tasks and split; one "
                                      "unit per task, run = --seed, one stream per evaluation env; discrete actions), "
                                      "e.g. to train DPT on the model's own contexts")
    threads: int = override(RunOptions, "threads", 1)

    def __post_init__(self) -> None:
        if self.data is None:
            self.data = default_dataset()
        refuse(self, ("threads",), lambda v: v < 0, "must be >= 0")
        refuse(self, ("episodes", "seeds"), lambda v: v <= 0, "must be positive")
        self.check_temperature()
        if self.greedy and self.temperature != 1.0:
            raise UserError(f"--greedy takes no sampling, so --temperature {self.temperature} would be ignored; "
                            "pass one of the two")
        if self.greedy and self.sampling != "step":
            raise UserError(f"--greedy takes no sampling, so --sampling {self.sampling} would be ignored; pass one of "
                            "the two")
        if self.split not in ("heldout", "train", "all"):
            raise UserError(f"--split must be heldout, train or all, got {self.split!r}")
        if self.max_tasks is not None and self.max_tasks <= 0:
            raise UserError(f"--max-tasks must be positive, got {self.max_tasks} (leave it out to evaluate every task)")
        labels = {"--name": self.name, **({"--baseline-name": self.baseline_name} if self.baseline else {})}
        for label, _ in self.named_models()[1 + bool(self.baseline):]:
            labels[f"--models {label}"] = label
        for flag, label in labels.items():
            if not label.strip() or label.strip().lower() in RESERVED_LABELS:
                what = "a row the evaluation adds itself" if label.strip() else "empty"
                raise UserError(f"{flag} {label!r} is {what}; choose another label (not "
                                f"{' or '.join(RESERVED_LABELS)})")
        if self.baseline and self.name == self.baseline_name:
            raise UserError(f"--name and --baseline-name are both {self.name!r}: the two models' rows would be mixed; "
                            "give them different labels")
        names = [label for label, _ in self.named_models()]
        repeated = next((label for label in names if names.count(label) > 1), None)
        if repeated is not None:
            raise UserError(f"two models are labelled {repeated!r} (--name, --baseline-name, --models): their rows "
                            "would be mixed; give them different labels")

    def named_models(self) -> list[tuple[str, str]]:
        """(label, run folder) of every model to evaluate: --ckpt, --baseline (if given), then --models."""
        out = [(self.name, self.ckpt)] + ([(self.baseline_name, self.baseline)] if self.baseline else [])
        for item in self.models:
            label, sep, path = str(item).partition("=")
            if not sep or not label.strip() or not path.strip():
                raise UserError(f"--models {item!r} is not LABEL=RUN_FOLDER (e.g. --models DPT=runs/dpt)")
            out.append((label.strip(), path.strip()))
        return out


def pick_tasks(reader: Any, split: str, max_tasks: int | None) -> list[str]:
    """The dataset's tasks of one split (UserError if there are none)."""
    from ad.history.reader import task_split

    train, heldout = task_split(reader)
    tasks = {"heldout": heldout, "train": train, "all": sorted(train + heldout)}[split]
    if not tasks:
        raise UserError(no_tasks_advice(reader, split))
    return tasks[:max_tasks] if max_tasks else tasks


#: ``task_spec`` keys compared for every family where both specs record them: the Gymnasium id and the spaces,
#: as Minari records an env spec (a family adds the env parameters that matter, ``TaskFamily.task_kwargs``)
SPEC_KEYS = ("env_id", "observation_space", "action_space")


def no_tasks_advice(reader: Any, split: str) -> str:
    """Why the dataset has no complete ``split`` tasks, and the advice that fixes it: finish an interrupted
    generation, or regenerate with held-out tasks when the recorded split has none."""
    where = f"dataset {reader.location.base} has no {split} tasks to evaluate on"
    listed = (reader.metadata.get("split") or {}).get(split) or []
    note = reader.incomplete_note()
    if listed:  # the split names them, but none of them is complete yet
        return (f"{where}: none of its {len(listed)} {split} tasks is complete ({note.split(': ', 1)[1]})" if note
                else f"{where}: none of its {len(listed)} {split} tasks is complete; re-run the generate command that "
                     "made it to finish")
    fraction = ((reader.metadata.get("source") or {}).get("config") or {}).get("heldout_fraction")
    if split == "heldout" and fraction is not None:
        return (f"{where}: it was generated with --heldout-fraction {fraction}, which held out none of its tasks; "
                "regenerate it into a new --out with a larger --heldout-fraction (or more tasks), or pass --split "
                "train")
    return f"{where}; generate it with held-out tasks (e.g. --heldout-fraction 0.25) or pass --split train"


#: Memory per env of an evaluation (the env, the policy's context and its caches), and per (env, episode): the
#: returns of up to four policies as arrays, Python lists and eval.json text.
ENV_BYTES, EPISODE_BYTES = 64 << 10, 256


def eval_memory_bytes(tasks: int, seeds: int, episodes: int) -> int:
    """Rough peak memory of ``ad eval`` on ``tasks`` x ``seeds`` parallel envs for ``episodes`` episodes."""
    return tasks * seeds * (ENV_BYTES + episodes * EPISODE_BYTES)


def check_compatible(policy: Any, reader: Any, ckpt: str) -> None:
    """A checkpoint fits a dataset when both record the same task: the same family, the same values of
    :data:`SPEC_KEYS` and of the ``task_spec`` keys the family declares as its envs' parameters, the same state
    and action counts, and episodes no longer than the model saw. A checkpoint that recorded no training data
    (older ones) is checked on its spaces only."""
    spec = reader.spec
    family = getattr(policy, "family", None)
    if family is not None and family != reader.family:
        raise UserError(f"checkpoint {ckpt} was trained on {family} histories but dataset {reader.location.base} is "
                        f"{reader.family}: they are of different tasks; pass a {family} dataset or a model trained "
                        f"on {reader.family}")
    trained_spec = getattr(policy, "task_spec", None) or {}
    data_spec = reader.metadata.get("task_spec") or {}
    for key in (*SPEC_KEYS, *task_kwargs(reader.family)):
        if key in trained_spec and key in data_spec and trained_spec[key] != data_spec[key]:
            raise UserError(f"checkpoint {ckpt} was trained on {reader.family} with {key} {trained_spec[key]} but "
                            f"dataset {reader.location.base} has {key} {data_spec[key]}: they are of different tasks; "
                            "pass the dataset it was trained on (or one of the same settings)")
    for attr, expected in (("num_states", spec.state.n), ("num_actions", spec.action.n),
                           ("action_dim", spec.action.dim)):
        have = getattr(policy, attr, None)
        if have is not None and expected is not None and have != expected:
            raise UserError(f"checkpoint {ckpt} was trained with {attr}={have} but dataset {reader.location.base} "
                            f"has {attr}={expected}: they are of different tasks; pass the dataset it was trained on")
    length = getattr(policy, "episode_length", None)
    data_length = data_spec.get("episode_length")
    if length is not None and data_length is not None and int(data_length) > int(length):
        raise UserError(f"checkpoint {ckpt} knows episodes of up to {length} steps but {reader.location.base} has "
                        f"{data_length}-step episodes: they are of different tasks")


def sampling_options(sampling: str, family: str) -> dict[str, Any]:
    """The policy loader's options for ``--sampling`` on a dataset of ``family`` (none for the default, so a model
    family's loader that predates the option loads as before)."""
    return {} if sampling == "step" else {"sampling": sampling, "action_order": action_order(family)}


def evaluate(config: EvalConfig) -> dict[str, Any]:
    """Evaluate ``ckpt`` (and ``baseline``), random and the source curve; write files; return the summary."""
    import numpy as np

    from ad.evaluate import RandomPolicy, run_in_context, source_curve, summarise
    from ad.history import HistoryReader
    from ad.plots import plot_in_context
    from ad.record.rollouts import RolloutRecorder

    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    out = check_output_folder(config.out or Path(config.ckpt) / "eval")
    reader = HistoryReader(config.data)
    tasks = pick_tasks(reader, config.split, config.max_tasks)
    need = eval_memory_bytes(len(tasks), config.seeds, config.episodes)
    if config.record:
        need += RolloutRecorder.memory_bytes(reader, len(tasks) * config.seeds, config.episodes)
    check_memory(need, f"--seeds {config.seeds} x --episodes {config.episodes} on {len(tasks)} tasks"
                       f"{' (recorded: --record)' if config.record else ''}",
                 "pass fewer --seeds, --episodes or --max-tasks")
    note = reader.incomplete_note()
    if note:
        print(f"warning: {note}; evaluating on the {len(tasks)} {config.split} tasks it holds", file=sys.stderr)
    make_env = env_factory(reader.family)

    policies: list[tuple[str, Any]] = []
    for name, ckpt in config.named_models():
        policy = load_policy(ckpt, greedy=config.greedy, seed=config.seed, temperature=config.temperature,
                             **sampling_options(config.sampling, reader.family))
        check_compatible(policy, reader, ckpt)
        policies.append((name, policy))
    recorder = None
    if config.record:
        first = policies[0][1]
        if not hasattr(first, "last_logprob") or getattr(getattr(first, "model", None), "continuous_actions", False):
            raise UserError(f"--record needs the log-probability of each action, which {config.ckpt} does not report "
                            "(an RL-format model with discrete actions does); evaluate it without --record")
        recorder = RolloutRecorder(config.record, reader, tasks, config.seeds, config.seed, {
            "algorithm": "in-context", "ckpt": str(config.ckpt), "data": str(config.data), "split": config.split,
            "episodes": config.episodes, "greedy": config.greedy, "temperature": config.temperature,
            "sampling": config.sampling})
    out.mkdir(parents=True, exist_ok=True)  # only once the inputs are known to be good

    results = []
    for i, (name, policy) in enumerate(policies):
        setup = make_env(reader.metadata, tasks, config.seeds)
        results.append(run_in_context(policy, setup, config.episodes, config.seed, name, config.progress,
                                      recorder if i == 0 else None))
        if i == 0 and recorder is not None:
            print(f"recorded {recorder.write()} transitions of {name} on {len(tasks)} tasks to {config.record}")
    setup = make_env(reader.metadata, tasks, config.seeds)
    results.append(run_in_context(RandomPolicy(setup.num_actions, config.seed, setup.action_space), setup,
                                  config.episodes, config.seed, "random", config.progress))
    try:
        results.append(source_curve(reader, tasks, config.episodes))
        if results[-1].returns.shape[-1] < config.episodes:
            print(f"note: the source's histories have {results[-1].returns.shape[-1]} episodes; its row shows those "
                  f"(its 'last 10 episodes' are its own last 10)")
    except UserError as err:
        print(f"note: no source curve ({err})")
    optimal = float(np.mean(setup.optimal))

    summary = {"tasks": tasks, "episodes": config.episodes, "seeds": config.seeds, "greedy": config.greedy,
               "temperature": config.temperature, "sampling": config.sampling, "optimal_mean_return": optimal,
               "policies": {}}
    for result in results:
        mean, std = result.curve()
        summary["policies"][result.name] = {**summarise(result), "mean": mean.tolist(), "std": std.tolist(),
                                            "sem": result.standard_error().tolist(),
                                            "normalised": result.normalised_curve().tolist(),
                                            "returns": result.returns.tolist()}
        if result.success_curve() is not None:  # envs that report a per-step success (Meta-World)
            summary["policies"][result.name].update(success=result.success_curve().tolist(),
                                                    success_last_10=float(result.success_curve()[-10:].mean()))
    write_json_atomic(out / "eval.json", summary, indent=1)
    write_text_atomic(out / "eval.csv", _csv_text(results))
    curves = {r.name: (r.curve()[0], r.standard_error()) for r in results}
    plot_in_context(curves, optimal, out / "in_context.png",
                    title=f"In-context return on {len(tasks)} {config.split} tasks ({reader.family})")
    _print_table(summary)
    print(f"wrote {out / 'eval.json'}, {out / 'eval.csv'}, {out / 'in_context.png'}")
    summary["out"] = str(out)
    return summary


def _csv_text(results: list[Any]) -> str:
    """eval.csv: one row per policy and episode (mean and std of the return, mean return / optimal)."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(["policy", "episode", "mean_return", "std_return", "mean_normalised_return"])
    for result in results:
        mean, std = result.curve()
        norm = result.normalised_curve()
        for e in range(len(mean)):
            writer.writerow([result.name, e + 1, f"{mean[e]:.4f}", f"{std[e]:.4f}", f"{norm[e]:.4f}"])
    return buffer.getvalue()


def _print_table(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ad.evaluate import episodes_36_40

    table = Table(title=f"return / optimal return, {len(summary['tasks'])} tasks x {summary['seeds']} seeds")
    for col in ("policy", "first 5 episodes", "episodes 36-40", "last 10 episodes"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for name, row in summary["policies"].items():
        first, last = row.get("last_episodes", (0, 0))
        span = f" ({first}-{last})" if last else ""
        table.add_row(name, f"{row['first_episodes_normalised']:.3f}", f"{episodes_36_40(row):.3f}",
                      f"{row['last_episodes_normalised']:.3f}{span}")
    Console(width=120).print(table)
    for name, row in summary["policies"].items():
        if "success" in row:
            print(f"{name}: success rate {row['success'][0]:.2f} in episode 1, {row['success_last_10']:.2f} over "
                  f"the last 10 episodes")


register("ad", "eval", EvalConfig, evaluate,
         "in-context evaluation on held-out tasks (eval.json, eval.csv, in_context.png)")
