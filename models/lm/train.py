"""`ad train lm`: a causal LM on Language-format learning histories (Lightning): a pretrained LM + LoRA, or
(``--model scratch``) a Llama built from a config with a word tokenizer, all weights trained.

Besides the run folder of every run (:mod:`models.trainer`), ``model/`` holds ``lm.json`` (what ``ad eval`` needs
to act: base model, template, window, valid actions), ``adapter/`` (peft LoRA adapters), ``weights/`` (``--model
scratch``: the whole model), ``tokenizer/`` and, with ``--merge``, ``merged/`` (the adapters merged in).
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from ad.distributed.options import first_local_process
from ad.files import MODEL_DIR, write_json_atomic
from models.lm.config import RESUMABLE_CHANGES, SCRATCH, TrainLMConfig
from models.lm.loader import MODEL_TYPE, WEIGHTS_DIR
_EXPECTED_WARNINGS = (".*is_gradient_checkpointing.*",
                      # FSDP on CPU: torch's own notes on CPU support and on frozen + trainable weights in one unit
                      ".*FSDP.*CPU.*", ".*use_orig_params=True.*requires_grad.*")


def valid_actions(spec: Any) -> list[Any] | None:
    """The actions an LM policy chooses among: 0..n-1 for a discrete action space, None for open text."""
    return list(range(int(spec.action.n))) if spec.action.kind == "discrete" else None


#: the from-scratch LM's template for Box states (of those measured on LunarLander, the best held-out return at one
#: budget: docs/experiments/continuous.md)
BOX_TEMPLATE = "bins8"


def resolve_template(template: str, metadata: dict[str, Any], model: str = "") -> str:
    """The template to train with: ``template`` itself, or for "auto": for ``--model scratch`` "grid<N>" when the
    dataset's states are the cells of an N x N grid (``task_spec.size``, DarkRoom), :data:`BOX_TEMPLATE` when they
    are Box vectors (``task_spec.observation_space``, LunarLander), else "words"; otherwise the dataset's
    ``task_spec.template`` (written by the task that generated it), else "compact"."""
    if template != "auto":
        return template
    if model == SCRATCH:
        spec = metadata.get("task_spec") or {}
        size = spec.get("size")
        if isinstance(size, int) and size > 0:
            return f"grid{int(size)}"
        return BOX_TEMPLATE if (spec.get("observation_space") or {}).get("type") == "Box" else "words"
    return str((metadata.get("task_spec") or {}).get("template") or "compact")


def _base_name(name: str) -> str:
    """The model name to record: local folders as absolute paths, other names as given."""
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else name


def save_model(model: Any, tokenizer: Any, out: Path, info: dict[str, Any], merge: bool = False) -> Path:
    """Write model/ (adapter, tokenizer, lm.json and, with ``merge``, merged weights); returns the folder."""
    folder = out / MODEL_DIR
    folder.mkdir(parents=True, exist_ok=True)
    scratch = info.get("base_model") == SCRATCH  # all weights trained: the whole model, a plain transformers folder
    model.save_pretrained(folder / (WEIGHTS_DIR if scratch else "adapter"))
    tokenizer.save_pretrained(folder / "tokenizer")
    if merge and not scratch:
        import copy

        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(folder / "merged")
        tokenizer.save_pretrained(folder / "merged")
    write_json_atomic(folder / "lm.json", {"model_type": MODEL_TYPE, **info}, indent=1)
    return folder


def fsdp_strategy(config: TrainLMConfig) -> Any:
    """FSDP2 through Lightning's ``ModelParallelStrategy`` (a shard of each decoder layer per process:
    :meth:`models.lm.module.LMLightningModule.configure_model`); unlike ``"fsdp"`` (FSDP1) it runs on CPU too.
    Checkpoints hold the full LoRA state."""
    from lightning.pytorch.strategies import ModelParallelStrategy

    return ModelParallelStrategy(data_parallel_size=config.devices * config.num_nodes, tensor_parallel_size=1,
                                 save_distributed_checkpoint=False)


def build_model(config: TrainLMConfig, reader: Any) -> tuple[Any, Any]:
    """(model to train, tokenizer): the pretrained base + LoRA adapters, or for ``--model scratch`` a fresh Llama
    (:func:`models.lm.scratch.build_scratch`) on the template's word tokenizer, every weight trainable."""
    from ad.formats.language import get_template
    from ad.lm.pretrained import load_base
    from models.lm.module import add_lora
    from models.lm.scratch import build_scratch, scratch_tokenizer

    if config.model == SCRATCH:
        tokenizer = scratch_tokenizer(reader, get_template(config.template))
        model = build_scratch(tokenizer, config.n_layer, config.n_embd, config.n_head, config.n_ff,
                              max_positions=max(config.max_tokens, 16), seed=config.seed)
        return model, tokenizer
    base, tokenizer = load_base(config.model, config.dtype)
    return add_lora(base, config.lora_dict()), tokenizer


def trained_model(module: Any, trainer: Any, config: TrainLMConfig, reader: Any) -> Any:
    """The trained peft model as a plain module with full weights, or None on ranks other than 0 (FSDP's sharded
    weights are gathered, every rank taking part, into a fresh base model + LoRA on rank 0)."""
    from lightning.pytorch.strategies import ModelParallelStrategy

    if not isinstance(trainer.strategy, ModelParallelStrategy):
        return module.model if trainer.is_global_zero else None
    state = trainer.strategy.lightning_module_state_dict()  # collective: the full state on rank 0
    if not trainer.is_global_zero:
        return None
    model, _ = build_model(config, reader)
    prefix = "model."
    model.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
    return model


def train(config: TrainLMConfig) -> Path:
    """Train (or resume) a run in ``config.out``; returns the saved model folder (``model/``). Under DDP each process
    trains on its slice of the global ``--batch-size``; ``--strategy fsdp`` also shards the model, one unit per decoder
    layer. Only rank 0 writes ``model/``."""
    import dataclasses

    import lightning as L

    from ad.progress.hf import library_bars_off_in_logs
    from ad.lm.pretrained import position_limit
    from ad.registry import env_factory
    from models.trainer import check_resume, fit, load_checkpoint, lock_run, make_trainer, start_run, write_config
    from models.training import optim_config_of
    from models.lm.data import ShardedLMDataModule
    from models.lm.module import LMLightningModule
    from models.lm.watch import HeldoutReturn

    library_bars_off_in_logs()  # transformers' "Writing model shards" bars are carriage-return noise in a log
    out, reader = start_run(config)
    config = dataclasses.replace(config, template=resolve_template(config.template, reader.metadata, config.model))
    resume_from = check_resume(config, out, RESUMABLE_CHANGES, lambda path: load_checkpoint(path, "ad train lm"))
    L.seed_everything(config.seed, workers=True, verbose=False)
    model, tokenizer = build_model(config, reader)
    limit = position_limit(model)
    budget = min(config.max_tokens, limit) if limit else config.max_tokens
    if budget < config.max_tokens and first_local_process():
        warnings.warn(f"--max-tokens {config.max_tokens} exceeds the model's position limit {limit}; using {budget}",
                      stacklevel=2)
    datamodule = ShardedLMDataModule(reader, tokenizer, config.template, window=config.context,
                                     stride=config.stride, max_tokens=budget, loss_on=config.loss_on,
                                     batch_size=config.batch_size, val_batches=config.val_batches,
                                     num_workers=config.num_workers, seed=config.seed, subsample=config.subsample,
                                     expert_only=config.expert_only)
    actions = valid_actions(datamodule.spec)
    datamodule.setup()

    strategy = fsdp_strategy(config) if config.strategy == "fsdp" else None
    trainer = make_trainer(config, out, validate=config.val_every > 0 and datamodule.val_set is not None,
                           strategy=strategy)
    lock = lock_run(out)  # noqa: F841 - held until training ends: one writer per run folder (creates it)
    if config.watch_every and actions is not None and datamodule.heldout_tasks:
        tasks, make_env = datamodule.heldout_tasks, env_factory(reader.family)
        trainer.callbacks.append(HeldoutReturn(
            config.watch_every, config.watch_episodes, lambda: make_env(reader.metadata, tasks, config.watch_seeds),
            dict(tokenizer=tokenizer, template=config.template, actions=actions, context=config.context,
                 max_tokens=budget), seed=config.seed))
    write_config(config, out)
    model.train()  # from_pretrained leaves models in eval mode (LoRA dropout would be off)
    module = LMLightningModule(model, optim_config_of(config), log_every=config.log_every)
    fit(trainer, module, datamodule, out, resume_from, _EXPECTED_WARNINGS)
    trained = trained_model(module, trainer, config, reader)
    if trained is None:
        return out / MODEL_DIR
    spec = datamodule.spec
    info = {"base_model": SCRATCH if config.model == SCRATCH else _base_name(config.model), "dtype": config.dtype,
            "template": config.template, "context": config.context, "max_tokens": budget, "actions": actions,
            "num_states": int(spec.state.n) if spec.state.kind == "discrete" else None,
            "family": datamodule.reader.family, "steps": int(trainer.global_step)}
    return save_model(trained, tokenizer, out, info, merge=config.merge)


def run(config: TrainLMConfig) -> int:
    """CLI entry point of `ad train lm`."""
    folder = train(config)
    if first_local_process():
        print(f"model saved to {folder}  (act with it: ad eval --ckpt {Path(config.out)} --data {config.data})")
    return 0
