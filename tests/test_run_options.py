"""Options every command shares, declared once: the run options (``ad.config.groups.RunOptions``), one name per concept
(``learning_rate`` and its phase-prefixed forms, the old ``lr`` names still read), help texts that define an option in
at most two sentences, and ``--help`` in sections.

Datasets and runs recorded under the old names keep working: ``tests/data/main-1ae905f/darkroom3`` was written by main
at commit 1ae905f with ``lr`` in its recorded options."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

import ad.commands
from ad import cli, registry
from ad import config as ad_config
from ad.config import build_parser, parse_config
from ad.config.groups import RUN_GROUP, RunOptions, run_options
from cli_run import run_cli

ad.commands.load()
COMMANDS = registry.all_commands() + list(registry.demos().values())
RUN_FIELDS = {f.name: f for f in dataclasses.fields(RunOptions)}
OLD = Path(__file__).parent / "data" / "main-1ae905f"
QUIET = ["--progress", "false"]
GRID_QUIET = [*QUIET, "--plots", "false", "--tensorboard", "false"]


def label(cmd: registry.Command) -> str:
    return f"{cmd.group} {cmd.name}"


def argv_of(cmd: registry.Command) -> list[str]:
    """The command line that selects ``cmd`` (``ad demo --task T --model M`` for a demo)."""
    if cmd.group == "demo" and "/" in cmd.name:
        task, model = cmd.name.split("/")
        return ["demo", "--task", task, "--model", model]
    return [cmd.name] if cmd.group == "ad" else [cmd.group, cmd.name]


@pytest.fixture(autouse=True)
def _fresh_notes(monkeypatch):
    monkeypatch.setattr(ad_config, "_NOTED", set())


# ---------------------------------------------------------------------------- the run options, declared once
@pytest.mark.parametrize("cmd", COMMANDS, ids=label)
def test_every_command_takes_its_run_options_from_the_one_declaration(cmd):
    fields = {f.name: f for f in dataclasses.fields(cmd.config_cls)}
    taken = [name for name in RUN_FIELDS if name in fields]
    if not taken:  # ad inspect and the demo selector write nothing
        return
    assert issubclass(cmd.config_cls, run_options(*taken)), label(cmd)
    for name in taken:
        field, shared = fields[name], RUN_FIELDS[name]
        assert field.metadata["help"].startswith(shared.metadata["help"]), (label(cmd), name)
        assert field.metadata["group"] == RUN_GROUP and field.metadata["runtime"] == shared.metadata["runtime"]
    assert not RUN_FIELDS["seed"].metadata["runtime"]  # the seed changes the data; the others do not
    assert all(f.metadata["runtime"] for name, f in RUN_FIELDS.items() if name != "seed")


def test_a_command_has_only_the_run_options_it_uses():
    by_name = {label(cmd): {f.name for f in dataclasses.fields(cmd.config_cls)} for cmd in COMMANDS}
    assert {"tensorboard", "plots", "threads"}.isdisjoint(by_name["generate bandit"])
    assert "tensorboard" not in by_name["generate math"] and "plots" in by_name["generate math"]
    assert by_name["import minari"] & set(RUN_FIELDS) == {"out"}
    assert set(RUN_FIELDS) <= by_name["generate darkroom"] and set(RUN_FIELDS) <= by_name["generate keydoor"]


def test_run_options_gives_one_class_per_set_of_names():
    assert run_options("seed", "out") is run_options("out", "seed")
    assert [f.name for f in dataclasses.fields(run_options("progress", "out"))] == ["out", "progress"]
    with pytest.raises(TypeError, match="run_options takes names"):
        run_options("out", "colour")


def test_negative_threads_are_refused_for_every_command_that_takes_threads(capsys):
    cmds = [cmd for cmd in COMMANDS if any(f.name == "threads" for f in dataclasses.fields(cmd.config_cls))]
    assert len(cmds) >= 10
    for cmd in cmds:
        with pytest.raises(SystemExit) as done:
            cli.main([*argv_of(cmd), "--threads", "-1", "--print-config"])
        assert done.value.code == 2, label(cmd)
        assert "--threads" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", COMMANDS, ids=label)
def test_help_is_in_sections_with_the_run_options_in_theirs(cmd):
    text = build_parser(cmd.config_cls, "ad").format_help()
    if any(f.name in RUN_FIELDS for f in dataclasses.fields(cmd.config_cls)):
        section = text.split(f"\n{RUN_GROUP}:\n", 1)
        assert len(section) == 2, label(cmd)
        assert "--out" in section[1] or "--seed" in section[1]


# ---------------------------------------------------------------------------- help texts
_ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|etc|vs|cf)\.", re.IGNORECASE)
#: What a measurement or a machine note looks like in a help text (they belong on the docs' experiment pages).
FIGURES = re.compile(r"\d+(\.\d+)?\s*(GB|GiB|MB|MiB|ms)\b|\d+(\.\d+)?\s*%|\b(H100|H200|EPYC|RSS)\b|measured|"
                     r"\d+(\.\d+)?x (faster|slower)|steps/s|\b20\d\d-\d\d-\d\d\b|CPU cores|an hour", re.IGNORECASE)


def sentences(text: str) -> list[str]:
    """The sentences of a help text (abbreviations such as e.g. do not end one)."""
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`'\"(-])", _ABBREVIATIONS.sub("ABBR", text.strip())) if s]


def test_sentences_are_counted_as_a_reader_would():
    assert len(sentences("one thing (e.g. two). Then a second. And a third")) == 3
    assert len(sentences("a value, e.g. 3. Use it")) == 2


@pytest.mark.parametrize("cmd", COMMANDS, ids=label)
def test_every_help_text_defines_its_option_in_two_sentences_without_figures(cmd):
    for field in dataclasses.fields(cmd.config_cls):
        if not field.init:
            continue
        text = field.metadata.get("help", "")
        assert text, f"{label(cmd)} --{field.name} has no help"
        assert len(sentences(text)) <= 2, f"{label(cmd)} --{field.name}: {text}"
        found = FIGURES.search(text)
        assert found is None, f"{label(cmd)} --{field.name} carries a figure or machine note ({found.group(0)!r})"


# ---------------------------------------------------------------------------- one name per concept
#: command -> (old name, current name) of its renamed learning rates
RATES = {"train rl": [("lr", "learning_rate")], "train lm": [("lr", "learning_rate")],
         "generate darkroom": [("lr", "learning_rate")], "generate keydoor": [("lr", "learning_rate")],
         "generate gridworld": [("critic_lr", "critic_learning_rate"), ("simpo_lr", "simpo_learning_rate")],
         "generate textworld": [("sft_lr", "sft_learning_rate"), ("ppo_lr", "ppo_learning_rate")],
         "generate math": [("lr", "learning_rate")], "generate rlhf": [("lr", "learning_rate")],
         "generate lunarlander": [("lr", "learning_rate")],
         "demo bandit/rl": [("lr", "learning_rate")], "demo darkroom/lm": [("lr", "learning_rate")]}
CASES = [(name, old, new) for name, pairs in RATES.items() for old, new in pairs]
BY_LABEL = {label(cmd): cmd for cmd in COMMANDS}


def test_every_learning_rate_is_named_learning_rate():
    for cmd in COMMANDS:
        for field in dataclasses.fields(cmd.config_cls):
            words = field.name.split("_")
            assert "lr" not in words or field.name == "min_lr", f"{label(cmd)} --{field.name}"
            if field.name.endswith("learning_rate"):
                assert (field.name.replace("learning_rate", "lr") in field.metadata["aliases"]
                        or label(cmd) not in RATES), f"{label(cmd)} --{field.name} lost its old name"


@pytest.mark.parametrize("name,old,new", CASES, ids=[f"{n} {o}" for n, o, _ in CASES])
def test_an_old_rate_name_sets_the_new_option_with_a_one_line_note(name, old, new, capsys):
    cmd = BY_LABEL[name]
    flag, new_flag = "--" + old.replace("_", "-"), "--" + new.replace("_", "-")
    with pytest.raises(SystemExit) as done:
        cli.main([*argv_of(cmd), flag, "0.0005", "--print-config"])
    assert done.value.code == 0
    captured = capsys.readouterr()
    printed = yaml.safe_load(captured.out)
    assert printed[new] == 0.0005 and old not in printed
    notes = [line for line in captured.err.splitlines() if line.startswith("note:")]
    assert notes == [f"note: {flag} is deprecated; use {new_flag}"]
    assert flag + " " not in build_parser(cmd.config_cls, "ad").format_help()  # --help shows the new name only


@pytest.mark.parametrize("name,old,new", CASES, ids=[f"{n} {o}" for n, o, _ in CASES])
def test_both_rate_names_are_an_error_with_exit_2(name, old, new, capsys):
    flag, new_flag = "--" + old.replace("_", "-"), "--" + new.replace("_", "-")
    with pytest.raises(SystemExit) as done:
        cli.main([*argv_of(BY_LABEL[name]), flag, "0.001", new_flag, "0.001", "--print-config"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag} and {new_flag} name the same option" in err and "Traceback" not in err


def test_an_old_rate_name_in_a_config_file(tmp_path, capsys):
    from tasks.gridworld.config import GenerateConfig

    file = tmp_path / "c.yaml"
    file.write_text("simpo_lr: 0.0002\ncritic_lr: 0.003\n")
    cfg = parse_config(GenerateConfig, ["--config", str(file)], "ad generate gridworld")
    assert (cfg.simpo_learning_rate, cfg.critic_learning_rate) == (0.0002, 0.003)
    assert "note: simpo_lr is deprecated; use simpo_learning_rate" in capsys.readouterr().err


# ---------------------------------------------------------------------------- what was recorded under the old names
def _drop_last_unit(dataset: Path) -> str:
    """Forget the last committed unit of ``dataset`` (as if generation had been killed before it): its key."""
    meta = json.loads((dataset / "dataset.json").read_text())
    key = sorted(meta["units"])[-1]
    for file in meta["units"].pop(key)["files"]:
        (dataset / file).unlink()
    (dataset / "dataset.json").write_text(json.dumps(meta))
    return key


def test_a_dataset_recorded_with_lr_resumes_and_still_refuses_other_settings(tmp_path, capsys):
    data = tmp_path / "darkroom3"
    shutil.copytree(OLD / "darkroom3", data)
    assert json.loads((data / "dataset.json").read_text())["source"]["config"]["lr"] == 1e-4
    missing = _drop_last_unit(data)
    argv = ["generate", "darkroom", "--size", "3", "--steps-per-goal", "200", "--hidden", "16", "--out", str(data),
            *GRID_QUIET]
    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "--learning-rate", "0.001"])  # other settings: refused, naming the new name
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "--learning-rate (source.config.learning_rate): dataset 0.0001, this command 0.001" in err
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 0
    units = json.loads((data / "dataset.json").read_text())["units"]
    assert missing in units and len(units) == 8
    kept = [file for key, unit in units.items() if key != missing for file in unit["files"]]
    assert kept and all((data / f).read_bytes() == (OLD / "darkroom3" / f).read_bytes() for f in kept)  # resumed


def _train_argv(root: Path, max_steps: int) -> list[str]:
    return ["train", "rl", "--data", str(root / "data"), "--out", str(root / "run"), "--context", "20", "--batch-size",
            "4", "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--n-ff", "32", "--warmup-steps", "1",
            "--val-every", "0", "--threads", "1", "--checkpoint-every", "2", "--max-steps", str(max_steps), *QUIET]


@pytest.fixture(scope="module")
def old_style_run(tmp_path_factory) -> Path:
    """A tiny `ad train rl` run on the 1ae905f dataset whose config.yaml names the learning rate ``lr``, as runs
    written before the rename do."""
    root = tmp_path_factory.mktemp("oldrun")
    shutil.copytree(OLD / "darkroom3", root / "data")
    assert cli.run(_train_argv(root, 2)) == 0
    saved = yaml.safe_load((root / "run" / "config.yaml").read_text())
    saved["lr"] = saved.pop("learning_rate")
    (root / "run" / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    return root


def test_a_run_recorded_with_lr_resumes_and_evaluates(old_style_run, capsys):
    root = old_style_run
    code, err, _ = run_cli(capsys, *_train_argv(root, 4), "--resume", "--learning-rate", "0.05")
    assert code == 2 and "learning_rate 0.001 -> 0.05" in err  # a changed rate is still refused
    assert run_cli(capsys, *_train_argv(root, 4), "--resume")[0] == 0
    assert (root / "run" / "checkpoints" / "step=4.ckpt").is_file()
    assert run_cli(capsys, "eval", "--ckpt", str(root / "run"), "--data", str(root / "data"), "--episodes", "2",
                   "--seeds", "1", "--threads", "1", "--out", str(root / "eval"), *QUIET)[0] == 0
    assert (root / "eval" / "eval.json").is_file()


def test_a_benchmark_config_file_reads_an_old_option_name(tmp_path, capsys, monkeypatch):
    import argparse

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    from benchmarks import common

    def parser() -> argparse.ArgumentParser:
        made = argparse.ArgumentParser()
        made.add_argument("--learning-rate", "--lr", type=float, default=1e-3)
        return made

    file = tmp_path / "bench.yaml"
    file.write_text("lr: 0.02\n")
    assert common.parse_args(parser(), ["--config", str(file)]).learning_rate == 0.02
    assert "note: lr is deprecated; use learning_rate" in capsys.readouterr().err
    file.write_text("lr: 0.02\nlearning_rate: 0.03\n")
    with pytest.raises(SystemExit) as done:
        common.parse_args(parser(), ["--config", str(file)])
    assert done.value.code == 2 and "lr and learning_rate name the same option" in capsys.readouterr().err
