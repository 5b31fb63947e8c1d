"""`ad train rl`: train the AD transformer on an RL-format dataset with Lightning.

The run folder (``--out``, local; :mod:`models.trainer`) gets the final model as ``model/config.json`` +
``model/model.safetensors`` (:meth:`ADTransformer.from_pretrained`); ``--data`` may be any pyarrow / fsspec URL.
With ``--devices N`` (and ``--num-nodes M``) Lightning runs N x M processes (DDP): ``--batch-size`` stays the
global batch, each process trains on its slice (``ad.distributed.sampling``), so the loss trajectory matches one
process. The default ``ddp`` strategy re-runs this command for the extra processes: call it from the CLI (or a
script), or use ``ddp_spawn``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ad.distributed.options import first_local_process
from ad.errors import UserError
from ad.files import MODEL_DIR

from models.rl.config import RESUMABLE_CHANGES, ADConfig, TrainRLConfig, model_config_of
from models.rl.loader import TRAINING_DATA_FILE


def resolve_data_sizes(config: TrainRLConfig, spec: Any, metadata: dict) -> dict[str, int]:
    """num_states / state_dim / num_actions or action_dim (+ action bounds) / episode_length from the dataset; a
    UserError if they do not fit."""
    sizes = {"num_states": 0, "state_dim": 0, "num_actions": 0, "action_dim": 0, "episode_length": 0}
    for what, column, count, dim, needs in (
            ("states", spec.state, "num_states", "state_dim",
             "discrete or vector states (train a language model on it with `ad train lm` instead)"),
            ("actions", spec.action, "num_actions", "action_dim", "discrete or Box actions")):
        if column.kind == "discrete":
            sizes[count] = int(column.n)
        elif column.kind == "vector":
            sizes[dim] = int(column.dim)
        else:
            raise UserError(f"dataset {config.data} has {column.kind} {what}; the RL model needs {needs}")
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
    if sizes["action_dim"]:
        sizes.update(box_action_bounds(config, sizes["action_dim"], metadata))
    sizes["grid_size"] = config.grid_size
    if config.grid_size == -1:
        side = (metadata.get("task_spec") or {}).get("size")
        sizes["grid_size"] = int(side) if side and sizes["num_states"] == int(side) ** 2 else 0
    if sizes["num_states"] and config.state_dim or sizes["state_dim"] and config.num_states:
        raise UserError(f"dataset {config.data} has {spec.state.kind} states; drop --num-states / --state-dim")
    return sizes


def box_action_bounds(config: TrainRLConfig, dim: int, metadata: dict) -> dict[str, list[float]]:
    """action_low / action_high (one per dimension) from ``--action-low/--action-high`` or the dataset's
    ``task_spec.action_space`` (as :func:`ad.record.space_to_dict` writes it); a UserError naming the space where a
    bound is infinite or missing (both heads rescale actions from the bounds)."""
    import math

    space = (metadata.get("task_spec") or {}).get("action_space") or {}
    if config.action_low or config.action_high:
        low, high = list(config.action_low), list(config.action_high)
    elif "low" in space and "high" in space:
        low, high = (_per_dimension(space[key], dim, space) for key in ("low", "high"))
    else:
        raise UserError(f"dataset {config.data} records no bounds of its {dim}-dimensional Box actions "
                        "(task_spec.action_space.low / high); pass --action-low and --action-high")
    if len(low) != dim or len(high) != dim:
        raise UserError(f"--action-low / --action-high need {dim} values each (the dataset's action_dim), got "
                        f"{len(low)} and {len(high)}")
    if not all(math.isfinite(v) for v in low + high):
        raise UserError(f"dataset {config.data} has the action space {_describe(space, low, high)} with infinite "
                        f"bounds; --action-head {config.action_head} rescales actions from finite bounds: record the "
                        "env wrapped in gymnasium.wrappers.ClipAction / RescaleAction, or pass finite --action-low "
                        "and --action-high")
    if not all(lo < hi for lo, hi in zip(low, high)):
        raise UserError(f"the action space {_describe(space, low, high)} of dataset {config.data} needs low < high "
                        "in every dimension")
    return {"action_low": low, "action_high": high}


def _per_dimension(value: Any, dim: int, space: dict) -> list[float]:
    """One float per dimension from a recorded bound (one number for all, or a list; infinities as strings)."""
    values = value if isinstance(value, list) else [value] * dim
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise UserError(f"the recorded action space {space} has a bound that is not a number: {value!r}") from None


def _describe(space: dict, low: list[float], high: list[float]) -> str:
    """``Box(low, high, shape)`` of a recorded space, for messages."""
    return f"Box(low={low}, high={high}, shape={space.get('shape', [len(low)])})"


def check_values(config: TrainRLConfig, datamodule: Any) -> None:
    """Check that every state, reward and time step of the loaded windows fits the model's tables."""
    import numpy as np

    from ad.data import RLTrajectoryDataset

    for dataset in vars(datamodule).values():
        if not isinstance(dataset, RLTrajectoryDataset):
            continue
        columns = dataset.source.columns
        steps = columns["timesteps"]
        if config.time_embedding and steps.size and (steps.min() < 0 or steps.max() >= config.episode_length):
            raise UserError(f"dataset {config.data} has in-episode steps up to {steps.max()}, but the model embeds "
                            f"0..{config.episode_length - 1}; pass --episode-length {steps.max() + 1}")
        for key in ("states", "actions"):
            values = columns[key]
            if values.dtype.kind == "f" and values.size and not np.isfinite(values).all():
                row = int(np.flatnonzero(~np.isfinite(values.reshape(len(values), -1)).all(-1))[0])
                raise UserError(f"dataset {config.data} has a non-finite {key[:-1]} ({values[row].tolist()}) at row "
                                f"{row} of its windows; the RL model trains on finite values only: regenerate or "
                                "repair the dataset")
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


def state_statistics(config: TrainRLConfig, train_set: Any) -> dict[str, list[float]]:
    """With ``--normalize-states``: state_mean / state_std, per dimension, of the training windows' vector states
    (``--state-mean`` / ``--state-std`` where given; a dimension that never changes gets std 1); otherwise nothing."""
    import numpy as np

    if not config.normalize_states:
        return {}
    if not config.state_dim:
        raise UserError(f"--normalize-states standardises vector states; dataset {config.data} has discrete states: "
                        "drop --normalize-states")
    if config.state_mean:
        return {}
    states = np.asarray(train_set.source.columns["states"], dtype=np.float64).reshape(-1, config.state_dim)
    mean, std = states.mean(0), states.std(0)  # (D,), (D,)
    std = np.where(std > 1e-6 * np.maximum(1.0, np.abs(mean)), std, 1.0)
    return {"state_mean": mean.tolist(), "state_std": std.tolist()}


def _check_checkpoint(path: Path, config: TrainRLConfig) -> None:
    """UserError unless ``path`` is a readable Lightning checkpoint of a model with this config."""
    import dataclasses

    from models.trainer import describe_changes, load_checkpoint

    saved_model = load_checkpoint(path, "ad train rl", "hyper_parameters")["hyper_parameters"].get("model_config")
    if not isinstance(saved_model, dict):
        raise UserError(f"cannot resume: checkpoint {path} is not an `ad train rl` checkpoint (no model_config); "
                        "delete it to start over")
    current = dataclasses.asdict(model_config_of(config))
    defaults = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                for f in dataclasses.fields(ADConfig)}  # a checkpoint older than an option has its default
    changed = sorted(k for k in current if saved_model.get(k, defaults.get(k)) != current[k])
    if changed:
        raise UserError(f"cannot resume from {path}: its model does not fit these options/dataset "
                        f"({describe_changes(saved_model, current, changed)})")


def train(config: TrainRLConfig) -> Path:
    """Train (or resume) a run in ``config.out``; returns the folder of the final saved model."""
    import dataclasses

    import lightning as L

    from ad.distributed.sampling import ShardedRLDataModule
    from models.trainer import check_resume, fit, lock_run, make_trainer, start_run, write_config
    from models.rl.module import ADLightningModule
    from models.training import optim_config_of

    out, _ = start_run(config)
    datamodule = ShardedRLDataModule(config.data, window=config.context, batch_size=config.batch_size,
                                     subsample=config.subsample, expert_only=config.objective == "ed",
                                     optimal_targets=config.objective == "dpt" and config.dpt_target == "optimal",
                                     posterior_targets=config.objective == "dpt" and config.dpt_target == "posterior",
                                     val_batches=config.val_batches, num_workers=config.num_workers,
                                     seed=config.seed, history_start_share=config.history_start_share)
    datamodule.setup()
    config = dataclasses.replace(config, **resolve_data_sizes(config, datamodule.spec, datamodule.metadata))
    check_values(config, datamodule)
    config = dataclasses.replace(config, **state_statistics(config, datamodule.train_set))
    resume_from = check_resume(config, out, RESUMABLE_CHANGES, lambda path: _check_checkpoint(path, config))
    # --init-from's weights, checked before anything is written (a resumed run has its own in the checkpoint)
    initial = initial_weights(config) if config.init_from and resume_from is None else None

    trainer = make_trainer(config, out, validate=config.val_every > 0 and _has_val(datamodule))
    lock = lock_run(out)  # noqa: F841 - held until training ends: one writer per run folder (creates it)
    write_config(config, out)
    L.seed_everything(config.seed, workers=True, verbose=False)
    module = ADLightningModule(dataclasses.asdict(model_config_of(config)), optim_config_of(config),
                               log_every=config.log_every)
    if initial is not None:
        module.model.load_state_dict(initial)
    if config.compile:
        module.model.compile()
    fit(trainer, module, datamodule, out, resume_from)
    if not trainer.is_global_zero:
        return out / MODEL_DIR
    saved = module.model.save_pretrained(out / MODEL_DIR)
    write_training_data(saved, datamodule.metadata)
    return saved


#: Model options that may differ between ``--init-from``'s run and the new one (they change no weight).
INIT_FREE = ("attn_dropout", "resid_dropout", "embd_dropout")


def initial_weights(config: TrainRLConfig) -> dict[str, Any]:
    """The state dict of ``config.init_from``'s saved model; a UserError names the options in which that model
    differs from the one ``config`` builds."""
    import dataclasses

    from models.rl.model import ADTransformer
    from models.trainer import describe_changes

    saved = ADTransformer.from_pretrained(Path(config.init_from) / MODEL_DIR)
    old, new = dataclasses.asdict(saved.config), dataclasses.asdict(model_config_of(config))
    changed = sorted(k for k in new if k not in INIT_FREE and old.get(k) != new[k])
    if changed:
        raise UserError(f"--init-from {config.init_from}: its model does not fit these options/dataset "
                        f"({describe_changes(old, new, changed)}); pass the same model options, or train from "
                        "scratch without --init-from")
    return saved.state_dict()


def write_training_data(directory: Path, metadata: dict) -> None:
    """``training_data.json`` beside the weights: the dataset's task family and task spec, so that ``ad eval``
    refuses a dataset of another family or size with a clear message."""
    from ad.files import write_json_atomic

    record = {"family": metadata.get("family"), "task_spec": metadata.get("task_spec") or {}}
    write_json_atomic(directory / TRAINING_DATA_FILE, record, indent=1, default=str)


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
    if first_local_process():
        print(f"model saved to {model_dir}  (load it with models.rl.ADTransformer.from_pretrained)")
    return 0
