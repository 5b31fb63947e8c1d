"""Resuming a TRL trainer whose every ``chunk_steps`` optimiser steps commit one history unit."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from ad.errors import UserError
from ad.files import run_folder, write_json_atomic
from ad.history import HistorySpec, HistoryWriter, Location
from tasks.trl_runs.rollout_log import chunk_of


class Run(NamedTuple):
    """A TRL-driven run's files: its dataset writer, the dataset (a ``Path`` where local, else the ``--out`` URL),
    run folder, checkpoint folder, the checkpoint to resume from (None: a fresh start) and its summary so far."""
    writer: HistoryWriter
    out: Path | str
    run_dir: Path
    ckpt_dir: Path
    resume: str | None
    summary: dict[str, Any]

    def done(self, max_steps: int) -> bool:
        """Whether every training iteration is committed already (only the final policy is left to evaluate)."""
        return self.resume is not None and int(Path(self.resume).name.split("-")[1]) >= max_steps

    def save(self, summary: dict[str, Any], plot_title: str | None = None) -> None:
        """Write ``summary.json`` into the run folder and, given ``plot_title``, the reward curve beside it."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.run_dir / "summary.json", summary)
        if plot_title is not None:
            from tasks.trl_runs.plots import plot_reward_curve

            plot_reward_curve(self.out, self.run_dir / "reward_curve.png", title=plot_title)


def open_run(cfg: Any, spec: HistorySpec, family: str, metadata: dict[str, Any]) -> Run:
    """Open the dataset ``cfg.out`` and its run folder, and find where to resume (:func:`resume_point`). A fresh
    start does not trust a summary left in the run folder (a remote dataset's run folder outlives the dataset)."""
    location = Location.of(cfg.out)
    writer = HistoryWriter(location, spec=spec, family=family, metadata=metadata)
    local = location.local_path()
    run_dir = run_folder(cfg.out, location, cfg.run_dir)
    resume = resume_point(writer, out=cfg.out, seed=cfg.seed, chunk_steps=cfg.chunk_steps, steps=cfg.max_steps,
                          ckpt_dir=run_dir / "checkpoints")
    summary = run_dir / "summary.json"
    return Run(writer, Path(local) if local is not None else cfg.out, run_dir, run_dir / "checkpoints", resume,
               json.loads(summary.read_text()) if summary.is_file() and resume else {})


def resume_point(writer: HistoryWriter, *, out: str, seed: int, chunk_steps: int, steps: int,
                 ckpt_dir: Path) -> str | None:
    """Checkpoint to resume from (None = fresh start): the committed units (``<prefix>-c<index>`` of run ``seed``) times
    ``chunk_steps``, at most ``steps``; deletes checkpoints newer than the last committed unit."""
    done = sorted(chunk_of(task) for task, run in writer.completed_units() if run == seed)
    if done != list(range(len(done))):
        raise UserError(f"{out} holds units {done}, not a prefix 0..k-1; use a new --out folder")
    step = min(len(done) * chunk_steps, steps)
    for old in ckpt_dir.glob("checkpoint-*") if ckpt_dir.is_dir() else []:
        if int(old.name.split("-")[1]) > step:
            shutil.rmtree(old)  # saved, but its unit was never committed: those rows are regenerated
    if step == 0:
        return None
    path = ckpt_dir / f"checkpoint-{step}"
    if not path.is_dir():
        raise UserError(f"{out} has {len(done)} committed units but no {path}; the training state to resume "
                        "from is gone (or --run-dir names another folder than before): use a new --out")
    return str(path)


def load_policy(model: Any, checkpoint: str, lora: bool) -> Any:
    """The policy saved in a trainer ``checkpoint``: ``model`` with its LoRA adapter, or the full weights saved."""
    if lora:
        from peft import PeftModel

        return PeftModel.from_pretrained(model, checkpoint)
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=model.dtype)
