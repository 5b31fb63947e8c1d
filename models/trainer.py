"""The Lightning run shared by `ad train rl` and `ad train lm`: run-folder layout, resume checks, the Trainer, and
fitting with the expected warnings silenced and a NaN loss turned into a user-facing error.

Run folder (``--out``, a local path): ``config.yaml`` (the resolved options), ``checkpoints/`` (last.ckpt and the
latest step=N.ckpt, for --resume), ``tb/`` (TensorBoard: train/* and val/*), ``model/`` (the final model).
"""
from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

from ad.config import config_to_dict, current_names
from ad.distributed.options import first_local_process
from ad.errors import UserError

CHECKPOINT_DIR = "checkpoints"
LAST_CHECKPOINT = "last.ckpt"
CONFIG_FILE = "config.yaml"
#: Lightning warnings that never apply to these runs: windows are drawn at random with replacement (a resumed
#: run need not replay the interrupted epoch), a resumed run reuses its checkpoint folder on purpose, and a run
#: folder may have been moved before it resumes (older step files are removed at the end); validation batches are
#: the same on every process (not sharded), so val/* needs no sync.
COMMON_EXPECTED_WARNINGS = (".*sampler has shuffling enabled.*", ".*dataloader is not resumable.*",
                            ".*Checkpoint directory .* exists and is not empty.*", ".*LeafSpec.*",
                            ".*does not have many workers.*", ".*The dirpath has changed from.*",
                            ".*It is recommended to use `self.log\\('val/.*sync_dist=True.*")


def start_run(config: Any) -> tuple[Path, Any]:
    """(run folder ``--out``, reader of ``--data``) of a training run, after applying ``--threads``, quieting
    Lightning's info lines and refusing an incomplete dataset (unless ``--allow-incomplete``)."""
    import torch

    from ad.history import HistoryReader

    if config.threads:
        torch.set_num_threads(config.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    reader = HistoryReader(config.data)
    reader.require_complete(config.allow_incomplete)
    return Path(config.out).expanduser(), reader


def check_resume(config: Any, out: Path, resumable: Iterable[str],
                 check_checkpoint: Callable[[Path], None]) -> Path | None:
    """The checkpoint to resume from (None for a fresh run); UserError on a clash with what is in ``out``, where only
    the ``resumable`` options may differ from config.yaml and ``check_checkpoint(path)`` checks the checkpoint."""
    import yaml

    from ad.files import check_output_folder

    check_output_folder(out)
    last = out / CHECKPOINT_DIR / LAST_CHECKPOINT
    if not config.resume:
        if last.exists() and first_local_process():  # extra DDP processes start after rank 0 checked
            raise UserError(f"{out} already holds a training run; pass --resume to continue it, or choose another "
                            "--out")
        return None
    if not last.is_file():
        raise UserError(f"nothing to resume: {last} does not exist (drop --resume to start a new run)")
    check_checkpoint(last)
    current = config_to_dict(config)
    saved = current_names(config, _saved_options(out / CONFIG_FILE, yaml), str(out / CONFIG_FILE), quiet=True)
    # the run folder may have been moved or renamed since: where it is now is not an option of the run
    changed = sorted(k for k in current if k not in resumable and k != "out" and k in saved and saved[k] != current[k])
    if changed:
        raise UserError(f"--resume needs the same options as the run in {out}; changed: "
                        f"{describe_changes(saved, current, changed)} (pass the old values, or start a new run in "
                        "another --out)")
    return last


def _saved_options(file: Path, yaml: Any) -> dict[str, Any]:
    """The options recorded in a run's config.yaml; UserError when it is missing, empty or unreadable (a run
    must never resume with options nobody checked)."""
    problem = ""
    try:
        saved = yaml.safe_load(file.read_text(encoding="utf-8"))
        if not isinstance(saved, dict) or not saved:
            problem = "is empty" if saved in (None, "", {}) else "does not hold a mapping of options"
    except FileNotFoundError:
        problem = "is missing"
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        problem = f"is unreadable ({type(err).__name__})"
    if problem:
        raise UserError(f"cannot resume: {file} {problem}, so the run's options are unknown; write them back with "
                        f"the `ad train` command that started the run plus --print-config (`ad train ... --print-config "
                        f"> {file}`), then re-run with --resume") from None
    return saved


def describe_changes(old: dict[str, Any], new: dict[str, Any], keys: Iterable[str], shown: int = 6) -> str:
    """``"lr 0.001 -> 0.05, batch_size 32 -> 16"``: one short line, long values cut, at most ``shown`` keys."""
    keys = list(keys)
    parts = [f"{k} {_short(old.get(k))} -> {_short(new.get(k))}" for k in keys[:shown]]
    if len(keys) > shown:
        parts.append(f"and {len(keys) - shown} more ({', '.join(keys[shown:])})")
    return ", ".join(parts)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def lock_run(out: Path) -> Any:
    """Take the run folder's lock (the one ``ad generate`` takes; it creates the folder) so that a second `ad train`
    on the same ``--out`` stops with one error line; keep the returned object for the whole run. Only the first process
    on the first machine locks (the extra DDP processes write into the same folder on purpose)."""
    import os

    from ad.history.lock import DatasetLock
    from ad.history.storage import Location
    from ad.files import check_output_folder

    check_output_folder(out)
    if not first_local_process() or int(os.environ.get("NODE_RANK", "0") or 0) != 0:
        return None
    return DatasetLock.acquire(Location.of(out), advice="then pass --resume to continue its run")


def corrupt_model_file(file: Path, err: Exception) -> UserError:
    """The error for a saved model file that cannot be read: `--resume` rewrites model/ from the last checkpoint
    (re-running without it is refused, the folder already holds a run)."""
    return UserError(f"checkpoint file {file} is corrupt ({err}); re-run the `ad train` command that made it with "
                     "--resume (it rewrites model/ from checkpoints/last.ckpt), or restore the folder from a copy")


def load_checkpoint(path: Path, what: str, *keys: str) -> dict[str, Any]:
    """A Lightning checkpoint holding state_dict, optimizer_states and global_step (+ ``keys``); else UserError."""
    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        for key in ("state_dict", "optimizer_states", "global_step", *keys):
            ckpt[key]
    except Exception as err:  # noqa: BLE001 - any failure to read it is a broken file
        raise UserError(f"cannot resume: checkpoint {path} is unreadable or not an `{what}` checkpoint "
                        f"({type(err).__name__}: {err}); delete it to start over") from None
    return ckpt


def write_config(config: Any, out: Path) -> None:
    """Save the resolved options as ``out/config.yaml`` (once per machine under DDP)."""
    import yaml

    from ad.files import write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    if first_local_process():
        write_text_atomic(out / CONFIG_FILE, yaml.safe_dump(config_to_dict(config), sort_keys=False))


def make_trainer(config: Any, out: Path, validate: bool, strategy: Any = None) -> Any:
    """The Lightning Trainer of a run: checkpoints, TensorBoard, validation schedule and process layout.
    ``strategy`` overrides ``config.strategy`` with a strategy object; data modules shard the global batch themselves
    (``use_distributed_sampler=False``); ``config.progress`` shows :mod:`ad.progress.lightning`'s step bar."""
    import lightning as L
    from lightning.fabric.utilities.exceptions import MisconfigurationException
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import TensorBoardLogger

    from ad.progress.lightning import StepProgressBar

    checkpoint = ModelCheckpoint(dirpath=out / CHECKPOINT_DIR, filename="{step}", save_top_k=1, save_last=True,
                                 every_n_train_steps=config.checkpoint_every)
    callbacks = [checkpoint, StepProgressBar()] if config.progress else [checkpoint]
    callbacks.append(safe_interrupt_callback())
    try:
        return L.Trainer(
            max_steps=config.max_steps, accelerator=config.accelerator, devices=config.devices,
            num_nodes=config.num_nodes, strategy=strategy or config.strategy, use_distributed_sampler=False,
            gradient_clip_val=config.grad_clip or None, precision=config.precision,
            logger=TensorBoardLogger(str(out), name="tb", version="", default_hp_metric=False),
            callbacks=callbacks, log_every_n_steps=config.log_every,
            val_check_interval=config.val_every if validate else None, check_val_every_n_epoch=None,
            limit_val_batches=config.val_batches if validate else 0, num_sanity_val_steps=0,
            enable_progress_bar=config.progress, enable_model_summary=False, default_root_dir=str(out),
        )
    except (ValueError, MisconfigurationException) as err:  # Lightning refuses this process layout
        raise UserError(f"cannot train with --accelerator {config.accelerator} --devices {config.devices} "
                        f"--num-nodes {config.num_nodes} --strategy {config.strategy}: {err}") from None


def safe_interrupt_callback() -> Any:
    """A Lightning callback that moves a Ctrl-C during ``trainer.fit`` to the end of the current training or
    validation step (:meth:`ctrl_c_at_step_ends`), so the interrupt never lands inside a library's critical section (a
    checkpoint being written, a logger's lock held), where a graceful shutdown could block; a second Ctrl-C
    interrupts at once."""
    from lightning.pytorch.callbacks import Callback

    class SafeInterrupt(Callback):
        def __init__(self) -> None:
            self.requested = False

        @contextlib.contextmanager
        def ctrl_c_at_step_ends(self):
            """While active (main thread only): the first SIGINT sets a flag, read at the next step end."""
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            self.requested = False

            def handler(signum: int, frame: Any) -> None:
                if self.requested:  # the second Ctrl-C: now
                    raise KeyboardInterrupt
                self.requested = True
                print("\nstopping at the end of this step (Ctrl-C again to stop at once)", file=sys.stderr,
                      flush=True)

            previous = signal.signal(signal.SIGINT, handler)
            try:
                yield
            finally:
                signal.signal(signal.SIGINT, previous)

        def _stop_if_requested(self) -> None:
            if self.requested:
                raise KeyboardInterrupt  # Lightning's graceful shutdown, as for a Ctrl-C it catches itself

        def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
            self._stop_if_requested()

        def on_validation_batch_end(self, *args: Any, **kwargs: Any) -> None:
            self._stop_if_requested()

        def on_train_start(self, *args: Any, **kwargs: Any) -> None:
            self._stop_if_requested()

    return SafeInterrupt()


def fit(trainer: Any, module: Any, datamodule: Any, out: Path, resume_from: Path | None,
        expected_warnings: Iterable[str] = ()) -> None:
    """``trainer.fit`` (resuming from ``resume_from``), then the final state to ``checkpoints/last.ckpt``; a NaN / inf
    loss stops the run with a UserError naming the last good checkpoint."""
    from models.training import NonFiniteLossError, non_finite_error

    last = out / CHECKPOINT_DIR / LAST_CHECKPOINT
    stopper = next((cb for cb in getattr(trainer, "callbacks", ()) if hasattr(cb, "ctrl_c_at_step_ends")), None)
    try:
        with warnings.catch_warnings(), (stopper.ctrl_c_at_step_ends() if stopper else contextlib.nullcontext()):
            for pattern in (*COMMON_EXPECTED_WARNINGS, *expected_warnings):
                warnings.filterwarnings("ignore", message=pattern)
            trainer.fit(module, datamodule=datamodule, ckpt_path=str(resume_from) if resume_from else None)
    except NonFiniteLossError as err:
        raise non_finite_error(err, last) from None
    except SystemExit:  # Lightning turns Ctrl-C into a graceful stop and sys.exit(1)
        if not trainer.interrupted:
            raise
        raise KeyboardInterrupt("re-run the same command with --resume to continue from its last checkpoint"
                                if last.is_file() else "no checkpoint was written yet; re-run the same command "
                                "to start again") from None
    trainer.save_checkpoint(last)  # the final state, for a later --resume
    if trainer.is_global_zero:
        remove_stale_checkpoints(out / CHECKPOINT_DIR)


def remove_stale_checkpoints(folder: Path) -> None:
    """Keep last.ckpt and the newest ``step=N.ckpt``; remove older step files (a killed run's, kept by no one)."""
    import re

    steps = sorted((int(m.group(1)), path) for path in folder.glob("step=*.ckpt")
                   if (m := re.fullmatch(r"step=(\d+)\.ckpt", path.name)))
    for _, path in steps[:-1]:
        path.unlink(missing_ok=True)
