"""Deprecated option names (``option(aliases=...)``): read from the command line, config files and recorded
settings with one note per old name; hidden from --help; both names an error."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import yaml

from ad import config as ad_config
from ad.config import build_parser, make_config, option, parse_config
from ad.errors import UserError


@dataclasses.dataclass
class Toy:
    """A config with two renamed options."""

    beta: float = option(0.05, "weight of the KL penalty", aliases=("kl_coef",))
    gae_lambda: float = option(0.95, "GAE lambda", aliases=("lam",))
    shuffle: bool = option(True, "shuffle", aliases=("old_shuffle",))
    resume: bool = option(False, "resume the run in out")


@pytest.fixture(autouse=True)
def _fresh_notes(monkeypatch):
    monkeypatch.setattr(ad_config, "_NOTED", set())


def test_old_flag_sets_the_new_option_with_one_note(capsys):
    cfg = parse_config(Toy, ["--kl-coef", "0.1", "--lam", "0.9", "--no-old-shuffle"], "toy")
    assert (cfg.beta, cfg.gae_lambda, cfg.shuffle) == (0.1, 0.9, False)
    err = capsys.readouterr().err.splitlines()
    assert "note: --kl-coef is deprecated; use --beta" in err and "note: --lam is deprecated; use --gae-lambda" in err
    parse_config(Toy, ["--kl-coef", "0.2"], "toy")
    assert capsys.readouterr().err == ""  # once per name
    assert parse_config(Toy, ["--old-shuffle"], "toy").shuffle is True


def test_help_shows_only_the_new_name():
    text = build_parser(Toy, "toy").format_help()
    assert "--beta" in text and "--gae-lambda" in text
    assert "kl-coef" not in text and "--lam " not in text and "old-shuffle" not in text


@pytest.mark.parametrize("argv", [["--kl-coef", "0.1", "--beta", "0.2"], ["--beta", "0.2", "--kl-coef", "0.2"]])
def test_both_names_on_the_command_line_is_an_error(argv):
    with pytest.raises(UserError, match="--kl-coef and --beta name the same option.*give only --beta"):
        parse_config(Toy, argv, "toy")


def test_old_name_in_a_config_file(tmp_path, capsys):
    file = tmp_path / "c.yaml"
    file.write_text("kl_coef: 0.3\nlam: 0.8\n")
    cfg = parse_config(Toy, ["--config", str(file)], "toy")
    assert (cfg.beta, cfg.gae_lambda) == (0.3, 0.8)
    assert "note: kl_coef is deprecated; use beta" in capsys.readouterr().err
    cfg = parse_config(Toy, ["--config", str(file), "--beta", "0.4"], "toy")  # a flag still overrides the file
    assert cfg.beta == 0.4
    file.write_text("kl_coef: 0.3\nbeta: 0.3\n")
    with pytest.raises(UserError, match=r"config file .*c.yaml: kl_coef and beta name the same option"):
        parse_config(Toy, ["--config", str(file)], "toy")


def test_print_config_writes_the_new_name(capsys):
    with pytest.raises(SystemExit) as done:
        parse_config(Toy, ["--kl-coef", "0.1", "--print-config"], "toy")
    assert done.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["beta"] == 0.1 and "kl_coef" not in printed


def test_make_config_reads_old_names():
    assert make_config(Toy, {"lam": 0.5}).gae_lambda == 0.5
    with pytest.raises(UserError, match="lam and gae_lambda"):
        make_config(Toy, {"lam": 0.5, "gae_lambda": 0.5})


def test_cli_error_line_and_exit_code_2(capsys):
    from ad import cli

    with pytest.raises(SystemExit) as done:
        cli.main(["generate", "textworld", "--kl-coef", "0.1", "--beta", "0.1", "--print-config"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "--kl-coef and --beta" in err and "Traceback" not in err


def test_renamed_textworld_and_math_options_read_their_old_names(capsys):
    from tasks.math.config import GenerateConfig as MathConfig
    from tasks.textworld.config import GenerateConfig as TextWorldConfig

    tw = parse_config(TextWorldConfig, ["--kl-coef", "0.07", "--lam", "0.9"], "ad generate textworld")
    assert (tw.beta, tw.gae_lambda) == (0.07, 0.9)
    assert parse_config(MathConfig, ["--iterations", "7"], "ad generate math").max_steps == 7
    assert make_config(MathConfig, {"preset": "cpu"}).max_steps == 60
    err = capsys.readouterr().err
    assert "note: --iterations is deprecated; use --max-steps" in err


def test_dataset_recorded_with_an_old_name_resumes(tmp_path):
    from ad.config import data_options
    from ad.history import ColumnSpec, HistorySpec, HistoryWriter

    spec = HistorySpec(ColumnSpec.discrete(4), ColumnSpec.discrete(2))
    old = {"kl_coef": 0.05, "lam": 0.95, "shuffle": True}  # what a run recorded before the rename
    writer = HistoryWriter(tmp_path / "ds", spec, family="toy", metadata={"source": {"config": old}})
    n = 4
    with writer.unit("task-a", 0) as unit:
        unit.append({"stream": np.zeros(n, np.int32), "update": np.zeros(n, np.int64),
                     "episode": np.zeros(n, np.int32), "step": np.arange(n, dtype=np.int32),
                     "state": np.arange(n), "action": np.zeros(n, np.int64), "reward": np.zeros(n, np.float32),
                     "terminated": np.zeros(n, bool), "truncated": np.zeros(n, bool),
                     "logprob": np.zeros(n, np.float32)})
    writer.close()
    current = data_options(make_config(Toy, {}))
    current.pop("resume")
    HistoryWriter(tmp_path / "ds", spec, family="toy", metadata={"source": {"config": current}}).close()
    changed = {**current, "beta": 0.5}
    with pytest.raises(UserError, match=r"--beta \(source.config.beta\): dataset 0.05, this command 0.5"):
        HistoryWriter(tmp_path / "ds", spec, family="toy", metadata={"source": {"config": changed}})


def test_training_run_saved_with_an_old_name_resumes(tmp_path):
    from models.trainer import CHECKPOINT_DIR, CONFIG_FILE, LAST_CHECKPOINT, check_resume

    (tmp_path / CHECKPOINT_DIR).mkdir()
    (tmp_path / CHECKPOINT_DIR / LAST_CHECKPOINT).write_bytes(b"x")
    (tmp_path / CONFIG_FILE).write_text(json.dumps({"kl_coef": 0.05, "lam": 0.95, "shuffle": True, "resume": False}))
    cfg = make_config(Toy, {"resume": True})
    assert check_resume(cfg, tmp_path, ["resume"], lambda path: None) == tmp_path / CHECKPOINT_DIR / LAST_CHECKPOINT
    with pytest.raises(UserError, match="changed: .*beta"):
        check_resume(make_config(Toy, {"resume": True, "beta": 0.5}), tmp_path, ["resume"], lambda path: None)


def test_learning_rate_and_max_steps_read_their_old_names():
    from tasks.lunarlander.config import GenerateConfig as LunarConfig
    from tasks.math.config import GenerateConfig as MathConfig
    from tasks.rlhf.config import GenerateConfig as RLHFConfig

    rlhf = parse_config(RLHFConfig, ["--steps", "5", "--lr", "0.001"], "ad generate rlhf")
    assert (rlhf.max_steps, rlhf.learning_rate) == (5, 0.001)
    assert parse_config(MathConfig, ["--lr", "0.002"], "ad generate math").learning_rate == 0.002
    assert make_config(LunarConfig, {"lr": 0.003}).learning_rate == 0.003
    with pytest.raises(UserError, match="--lr and --learning-rate"):
        parse_config(RLHFConfig, ["--lr", "0.1", "--learning-rate", "0.1"], "ad generate rlhf")
