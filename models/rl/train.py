"""`ad train rl`: train the AD transformer on an RL-format dataset with Lightning.

Run folder (``--out``)::

    config.yaml          the resolved options (data-derived sizes filled in)
    checkpoints/         last.ckpt (+ the latest step=N.ckpt), written every --checkpoint-every steps
    tb/                  TensorBoard logs (train/* and val/* metrics)
    model/               the final model (config.json + model.safetensors), for ADTransformer.from_pretrained

The run folder is a local path; ``--data`` may be any pyarrow / fsspec URL. With ``--devices N``
(and ``--num-nodes M``) Lightning runs N x M processes (DDP; gloo on CPU): ``--batch-size`` stays the
global batch, each process trains on its slice of it (``ad.distributed.sampling``), so the loss
trajectory matches one process. Under the default ``ddp`` strategy Lightning starts the extra
processes by re-running this command, so call it from the CLI (or a script), or use ``ddp_spawn``.
"""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from ad.config import config_to_dict
from ad.errors import UserError
from models.rl.config import RESUMABLE_CHANGES, TrainRLConfig, model_config_of

CHECKPOINT_DIR = "checkpoints"
LAST_CHECKPOINT = "last.ckpt"
CONFIG_FILE = "config.yaml"
MODEL_DIR = "model"
#: Lightning warnings that do not apply here: windows are sampled at random with replacement, so a resumed
#: run need not replay the interrupted epoch, and a resumed run reuses its checkpoint folder on purpose.
_EXPECTED_WARNINGS = (".*sampler has shuffling enabled.*", ".*dataloader is not resumable.*",
                      ".*Checkpoint directory .* exists and is not empty.*", ".*LeafSpec.*",
                      # validation batches are the same on every process (not sharded), so val/* needs no sync
                      ".*It is recommended to use `self.log\\('val/.*sync_dist=True.*")


def resolve_data_sizes(config: TrainRLConfig, spec: Any, metadata: dict) -> dict[str, int]:
    """num_states / state_dim / num_actions / episode_length from the dataset; a UserError if they do not fit."""
    sizes = {"num_states": 0, "state_dim": 0, "num_actions": 0, "episode_length": 0}
    if spec.state.kind == "discrete":
        sizes["num_states"] = int(spec.state.n)
    elif spec.state.kind == "vector":
        sizes["state_dim"] = int(spec.state.dim)
    else:
        raise UserError(f"dataset {config.data} has {spec.state.kind} states; the RL model needs discrete or vector "
                        "states (train a language model on it with `ad train lm` instead)")
    if spec.action.kind != "discrete":
        raise UserError(f"dataset {config.data} has {spec.action.kind} actions; the RL model needs discrete actions")
    sizes["num_actions"] = int(spec.action.n)
    episode_length = (metadata.get("task_spec") or {}).get("episode_length")
    sizes["episode_length"] = int(episode_length or 0)
    if not sizes["episode_length"] and not config.episode_length:
        raise UserError(f"dataset {config.data} does not record task_spec.episode_length; pass --episode-length")
    for name, value in sizes.items():
        given = getattr(config, name)
        if given and value and given != value:
            raise UserError(f"--{name.replace('_', '-')} {given} does not fit dataset {config.data}, which has "
                            f"{name} = {value}; drop the option or use another dataset")
        if given and not value:
            sizes[name] = given
    sizes["grid_size"] = config.grid_size
    if config.grid_size == -1:
        side = (metadata.get("task_spec") or {}).get("size")
        sizes["grid_size"] = int(side) if side and sizes["num_states"] == int(side) ** 2 else 0
    if sizes["num_states"] and config.state_dim or sizes["state_dim"] and config.num_states:
        raise UserError(f"dataset {config.data} has {spec.state.kind} states; drop --num-states / --state-dim")
    return sizes


def check_values(config: TrainRLConfig, datamodule: Any) -> None:
    """Check that every state, reward and time step of the loaded windows fits the model's tables."""
    import numpy as np

    from ad.data import RLTrajectoryDataset

    for dataset in vars(datamodule).values():
        if not isinstance(dataset, RLTrajectoryDataset):
            continue
        columns = dataset.source.columns
        steps = columns["timesteps"]
        if steps.size and (steps.min() < 0 or steps.max() >= config.episode_length):
            raise UserError(f"dataset {config.data} has in-episode steps up to {steps.max()}, but the model embeds "
                            f"0..{config.episode_length - 1}; pass --episode-length {steps.max() + 1}")
        states = columns["states"]
        if config.num_states and states.size and (states.min() < 0 or states.max() >= config.num_states):
            raise UserError(f"dataset {config.data} has state ids outside 0..{config.num_states - 1}")
        rewards = columns["rewards"]
        if config.reward_kind == "discrete" and rewards.size:
            bad = (rewards != np.round(rewards)) | (rewards < 0) | (rewards >= config.num_rewards)
            if bad.any():
                raise UserError(f"dataset {config.data} has reward {rewards[bad][0]}, not one of the integers "
                                f"0..{config.num_rewards - 1}; pass --reward-kind continuous or a larger "
                                "--num-rewards")


def _check_resume(config: TrainRLConfig, out: Path) -> Path | None:
    """The checkpoint to resume from (None for a fresh run); UserError on a clash with what is in ``out``."""
    import yaml

    last = out / CHECKPOINT_DIR / LAST_CHECKPOINT
    if not config.resume:
        if last.exists() and _first_local_process():  # extra DDP processes start after rank 0 checked
            raise UserError(f"{out} already holds a training run; pass --resume to continue it, or choose another "
                            "--out")
        return None
    if not last.is_file():
        raise UserError(f"nothing to resume: {last} does not exist (drop --resume to start a new run)")
    _check_checkpoint(last, config)
    saved_file = out / CONFIG_FILE
    if saved_file.is_file():
        saved = yaml.safe_load(saved_file.read_text()) or {}
        current = config_to_dict(config)
        changed = sorted(k for k in current if k not in RESUMABLE_CHANGES and k in saved and saved[k] != current[k])
        if changed:
            diffs = ", ".join(f"{k}: {saved[k]!r} -> {current[k]!r}" for k in changed)
            raise UserError(f"--resume needs the same options as the run in {out}; changed: {diffs}")
    return last


def _check_checkpoint(path: Path, config: TrainRLConfig) -> None:
    """UserError unless ``path`` is a readable Lightning checkpoint of a model with this config."""
    import dataclasses

    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        saved_model = ckpt["hyper_parameters"]["model_config"]
        ckpt["state_dict"], ckpt["optimizer_states"], ckpt["global_step"]
    except Exception as err:  # noqa: BLE001 - any failure to read it is a broken file
        raise UserError(f"cannot resume: checkpoint {path} is unreadable or not an `ad train rl` checkpoint "
                        f"({type(err).__name__}: {err}); delete it to start over") from None
    current = dataclasses.asdict(model_config_of(config))
    changed = sorted(k for k in current if saved_model.get(k) != current[k])
    if changed:
        diffs = ", ".join(f"{k}: {saved_model.get(k)!r} -> {current[k]!r}" for k in changed)
        raise UserError(f"cannot resume from {path}: its model does not fit these options/dataset ({diffs})")


def train(config: TrainRLConfig) -> Path:
    """Train (or resume) a run in ``config.out``; returns the folder of the final saved model."""
    import dataclasses

    import lightning as L
    import torch
    import yaml
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import TensorBoardLogger

    from ad.distributed.data import ShardedRLDataModule
    from models.rl.module import ADLightningModule, NonFiniteLossError, optim_config_of

    if config.threads:
        torch.set_num_threads(config.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    out = Path(config.out)
    datamodule = ShardedRLDataModule(config.data, window=config.context, batch_size=config.batch_size,
                                     subsample=config.subsample, expert_only=config.expert_only,
                                     val_batches=config.val_batches, num_workers=config.num_workers,
                                     seed=config.seed)
    datamodule.setup()
    config = dataclasses.replace(config, **resolve_data_sizes(config, datamodule.spec, datamodule.metadata))
    check_values(config, datamodule)
    resume_from = _check_resume(config, out)

    out.mkdir(parents=True, exist_ok=True)
    if _first_local_process():
        (out / CONFIG_FILE).write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False))
    L.seed_everything(config.seed, workers=True, verbose=False)
    module = ADLightningModule(dataclasses.asdict(model_config_of(config)), optim_config_of(config),
                               log_every=config.log_every)
    if config.compile:
        module.model.compile()
    checkpoint = ModelCheckpoint(dirpath=out / CHECKPOINT_DIR, filename="{step}", save_top_k=1,
                                 save_last=True, every_n_train_steps=config.checkpoint_every)
    validate = config.val_every > 0 and _has_val(datamodule)
    trainer = L.Trainer(
        max_steps=config.max_steps, accelerator=config.accelerator, devices=config.devices,
        num_nodes=config.num_nodes, strategy=config.strategy,
        use_distributed_sampler=False,  # ShardedRLDataModule gives each process its slice of the global batch
        gradient_clip_val=config.grad_clip or None,
        logger=TensorBoardLogger(str(out), name="tb", version="", default_hp_metric=False),
        callbacks=[checkpoint], log_every_n_steps=config.log_every,
        val_check_interval=config.val_every if validate else None, check_val_every_n_epoch=None,
        limit_val_batches=config.val_batches if validate else 0, num_sanity_val_steps=0,
        enable_progress_bar=config.progress, enable_model_summary=False, default_root_dir=str(out),
    )
    try:
        with warnings.catch_warnings():
            for pattern in _EXPECTED_WARNINGS:
                warnings.filterwarnings("ignore", message=pattern)
            trainer.fit(module, datamodule=datamodule, ckpt_path=str(resume_from) if resume_from else None)
    except NonFiniteLossError as err:
        from ad.training import non_finite_error

        raise non_finite_error(err, out / CHECKPOINT_DIR / LAST_CHECKPOINT) from None
    trainer.save_checkpoint(out / CHECKPOINT_DIR / LAST_CHECKPOINT)  # the final state, for a later --resume
    if not trainer.is_global_zero:
        return out / MODEL_DIR
    return module.model.save_pretrained(out / MODEL_DIR)


def _first_local_process() -> bool:
    """False in the extra processes Lightning starts on this machine (they re-run the command)."""
    return int(os.environ.get("LOCAL_RANK", "0")) == 0


def _has_val(datamodule: Any) -> bool:
    """Whether the data module has held-out windows to validate on."""
    try:
        loader = datamodule.val_dataloader()
    except (UserError, ValueError):
        return False
    return loader is not None and len(loader) > 0


def run(config: TrainRLConfig) -> int:
    """CLI entry point of `ad train rl`."""
    model_dir = train(config)
    if _first_local_process():
        print(f"model saved to {model_dir}  (load it with models.rl.ADTransformer.from_pretrained)")
    return 0
