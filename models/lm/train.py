"""`ad train lm`: fine-tune a causal LM with LoRA on Language-format learning histories (Lightning).

Run folder (``--out``)::

    config.yaml          the resolved options
    checkpoints/         last.ckpt (+ the latest step=N.ckpt): LoRA weights + optimiser state, for --resume
    tb/                  TensorBoard logs (train/* and val/* metrics)
    model/lm.json        what ``ad eval`` needs to act: base model, template, window, valid actions
    model/adapter/       the LoRA adapters in peft format (``PeftModel.from_pretrained(base, model/adapter)``)
    model/tokenizer/     the tokenizer (with its pad token)
    model/merged/        with --merge: the base model with the adapters merged in (plain ``from_pretrained``)
"""
from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any

from ad.config import config_to_dict
from ad.errors import UserError
from models.lm.config import RESUMABLE_CHANGES, TrainLMConfig

CHECKPOINT_DIR = "checkpoints"
LAST_CHECKPOINT = "last.ckpt"
CONFIG_FILE = "config.yaml"
MODEL_DIR = "model"
MODEL_TYPE = "ad-lm"
_EXPECTED_WARNINGS = (".*sampler has shuffling enabled.*", ".*dataloader is not resumable.*",
                      ".*Checkpoint directory .* exists and is not empty.*", ".*LeafSpec.*",
                      ".*does not have many workers.*", ".*is_gradient_checkpointing.*")


def valid_actions(spec: Any) -> list[Any] | None:
    """The actions an LM policy chooses among: 0..n-1 for a discrete action space, None for open text."""
    return list(range(int(spec.action.n))) if spec.action.kind == "discrete" else None


def _check_resume(config: TrainLMConfig, out: Path) -> Path | None:
    """The checkpoint to resume from (None for a fresh run); UserError on a clash with what is in ``out``."""
    import torch
    import yaml

    last = out / CHECKPOINT_DIR / LAST_CHECKPOINT
    if not config.resume:
        if last.exists():
            raise UserError(f"{out} already holds a training run; pass --resume to continue it, or choose another "
                            "--out")
        return None
    if not last.is_file():
        raise UserError(f"nothing to resume: {last} does not exist (drop --resume to start a new run)")
    try:
        ckpt = torch.load(last, map_location="cpu", weights_only=False)
        ckpt["state_dict"], ckpt["optimizer_states"], ckpt["global_step"]
    except Exception as err:  # noqa: BLE001 - any failure to read it is a broken file
        raise UserError(f"cannot resume: checkpoint {last} is unreadable ({type(err).__name__}: {err}); delete it "
                        "to start over") from None
    saved_file = out / CONFIG_FILE
    if saved_file.is_file():
        saved = yaml.safe_load(saved_file.read_text()) or {}
        current = config_to_dict(config)
        changed = sorted(k for k in current if k not in RESUMABLE_CHANGES and k in saved and saved[k] != current[k])
        if changed:
            diffs = ", ".join(f"{k}: {saved[k]!r} -> {current[k]!r}" for k in changed)
            raise UserError(f"--resume needs the same options as the run in {out}; changed: {diffs}")
    return last


def _base_name(name: str) -> str:
    """The model name to record: local folders as absolute paths, other names as given."""
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else name


def save_model(model: Any, tokenizer: Any, out: Path, info: dict[str, Any], merge: bool = False) -> Path:
    """Write model/ (adapter, tokenizer, lm.json and, with ``merge``, merged weights); returns the folder."""
    folder = out / MODEL_DIR
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder / "adapter")
    tokenizer.save_pretrained(folder / "tokenizer")
    if merge:
        import copy

        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(folder / "merged")
        tokenizer.save_pretrained(folder / "merged")
    (folder / "lm.json").write_text(json.dumps({"model_type": MODEL_TYPE, **info}, indent=1))
    return folder


def train(config: TrainLMConfig) -> Path:
    """Train (or resume) a run in ``config.out``; returns the saved model folder (``model/``)."""
    import lightning as L
    import torch
    import yaml
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import TensorBoardLogger

    from ad.pretrained import load_base, position_limit
    from models.lm.data import LMDataModule
    from models.lm.module import LORA_OPTIONS, LMLightningModule, add_lora
    from ad.training import NonFiniteLossError, OptimConfig

    if config.threads:
        torch.set_num_threads(config.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    out = Path(config.out)
    resume_from = _check_resume(config, out)
    base, tokenizer = load_base(config.model, config.dtype)
    limit = position_limit(base)
    budget = min(config.max_tokens, limit) if limit else config.max_tokens
    if budget < config.max_tokens:
        warnings.warn(f"--max-tokens {config.max_tokens} exceeds the model's position limit {limit}; using {budget}",
                      stacklevel=2)
    datamodule = LMDataModule(config.data, tokenizer, config.template, window=config.context, stride=config.stride,
                              max_tokens=budget, loss_on=config.loss_on, batch_size=config.batch_size,
                              val_batches=config.val_batches, num_workers=config.num_workers, seed=config.seed)
    actions = valid_actions(datamodule.spec)
    datamodule.setup()

    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False))
    L.seed_everything(config.seed, workers=True, verbose=False)
    model = add_lora(base, {k: getattr(config, k) for k in LORA_OPTIONS})
    optim = {k: getattr(config, k) for k in vars(OptimConfig()) if hasattr(config, k)}
    optim["decay_steps"] = config.decay_steps or config.max_steps
    model.train()  # from_pretrained leaves models in eval mode (LoRA dropout would be off)
    module = LMLightningModule(model, optim, log_every=config.log_every)
    checkpoint = ModelCheckpoint(dirpath=out / CHECKPOINT_DIR, filename="{step}", save_top_k=1, save_last=True,
                                 every_n_train_steps=config.checkpoint_every)
    validate = config.val_every > 0 and datamodule.val_set is not None
    trainer = L.Trainer(
        max_steps=config.max_steps, accelerator="auto", devices=1,
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
    spec = datamodule.spec
    info = {"base_model": _base_name(config.model), "dtype": config.dtype, "template": config.template,
            "context": config.context, "max_tokens": budget, "actions": actions,
            "num_states": int(spec.state.n) if spec.state.kind == "discrete" else None,
            "family": datamodule.reader.family, "steps": int(trainer.global_step)}
    return save_model(model, tokenizer, out, info, merge=config.merge)


def run(config: TrainLMConfig) -> int:
    """CLI entry point of `ad train lm`."""
    folder = train(config)
    print(f"model saved to {folder}  (act with it: ad eval --ckpt {Path(config.out)} --data {config.data})")
    return 0
