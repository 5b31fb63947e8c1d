"""Sizes, seeds and bytes a command cannot take are refused up front in one ``error:`` line (exit code 2), before
anything is allocated or written: memory estimates against this machine (``ad.config.memory``), the seed range, text that
is not UTF-8, a remote store out of reach."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ad import cli
from cli_run import run_cli




@pytest.fixture(scope="module")
def bandit_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bounds") / "bandit"
    with pytest.raises(SystemExit) as done:
        cli.main(["generate", "bandit", "--out", str(out), "--instances", "8", "--pulls", "5", "--progress", "false",
                  "--heldout-fraction", "0.25"])
    assert done.value.code == 0
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    from benchmarks.helpers.tiny_lm import build_tiny  # one character = one token, 512 positions

    return str(build_tiny(tmp_path_factory.mktemp("tiny") / "model", n_layer=1, width=32))


# ---------------------------------------------------------------------------- bounded sizes
@pytest.mark.parametrize("argv,flag", [
    (["generate", "bandit", "--pulls", "1000000000"], "--pulls 1000000000"),
    (["generate", "gridworld", "--size", "100000"], "--size 100000"),
    (["train", "rl", "--data", "data/none", "--batch-size", "100000000"], "--batch-size 100000000"),
    (["train", "rl", "--data", "data/none", "--n-layer", "100000"], "--n-layer 100000"),
    (["train", "rl", "--data", "data/none", "--n-embd", "1000000"], "--n-embd 1000000"),
])
def test_sizes_beyond_this_machine_are_refused_before_allocating(tmp_path, capsys, argv, flag):
    out = tmp_path / "out"
    code, err, _ = run_cli(capsys, *argv, "--out", str(out))
    assert code == 2 and flag in err and "GiB of memory, more than this machine can give" in err
    assert not out.exists()


@pytest.mark.parametrize("flag,value", [("--seeds", "100000000"), ("--episodes", "1000000000")])
def test_eval_sizes_beyond_this_machine_are_refused_before_allocating(bandit_data, tmp_path, capsys, flag, value):
    out = tmp_path / "eval"
    code, err, _ = run_cli(capsys, "eval", "--data", str(bandit_data), "--ckpt", str(tmp_path / "run"),
                           "--split", "all", "--out", str(out), flag, value)
    assert code == 2 and f"{flag} {value}" in err and "GiB of memory" in err and not out.exists()


def test_the_default_sizes_fit(tmp_path):
    """The estimates refuse absurd sizes only: every command's defaults (and the large AD preset) fit."""
    from ad.commands.evaluate import eval_memory_bytes
    from ad.config import make_config
    from ad.config.memory import MEMORY_SHARE, physical_memory_bytes
    from models.rl.config import TrainRLConfig
    from models.rl.config import training_memory_bytes
    from tasks.bandit.config import GenerateConfig, memory_bytes

    budget = MEMORY_SHARE * physical_memory_bytes()
    assert memory_bytes(GenerateConfig.instances, 5, GenerateConfig.pulls) < budget / 100
    assert training_memory_bytes(make_config(TrainRLConfig, {})) < budget / 100
    assert training_memory_bytes(make_config(TrainRLConfig, {"preset": "large"})) < 8 << 30
    assert eval_memory_bytes(100, 3, 100) < budget / 100


@pytest.mark.parametrize("chars", [600, 50_000_000])
def test_a_math_question_longer_than_the_model_context_is_refused_before_training(tiny_model, tmp_path, capsys,
                                                                                   chars):
    """A 50 MB question used to be tokenized into a 57.6 GB allocation; it is checked against the model's
    context first (the tiny model: one token per character, 512 positions)."""
    problems = tmp_path / "p.jsonl"
    with problems.open("w") as f:
        f.write(json.dumps({"question": "What is 2 + 2?", "answer": "#### 4"}) + "\n")
        f.write(json.dumps({"question": "x" * chars, "answer": "#### 1"}) + "\n")
        f.write(json.dumps({"question": "What is 3 + 3?", "answer": "#### 6"}) + "\n")
    out = tmp_path / "m"
    code, err, _ = run_cli(capsys, "generate", "math", "--problems", str(problems), "--model", tiny_model,
                           "--out", str(out), "--max-new-tokens", "8", "--threads", "1", "--progress", "false")
    assert code == 2 and "p000001" in err and f"{chars:,} characters" in err and "512 positions" in err
    assert not out.exists()


# ---------------------------------------------------------------------------- seeds
@pytest.mark.parametrize("seed", ["-1", "2147483648", "12345678901234567890123"])
@pytest.mark.parametrize("command", [["generate", "bandit"], ["generate", "darkroom"], ["train", "rl"], ["eval"]])
def test_seeds_outside_what_the_generators_take_are_refused_at_parsing(tmp_path, capsys, seed, command):
    out = tmp_path / "out"
    code, err, _ = run_cli(capsys, *command, "--seed", seed, "--out", str(out))
    assert code == 2 and "--seed" in err and "0..2147483647" in err and seed in err
    assert not out.exists()


def test_a_seed_in_a_config_file_is_checked_too(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("seed: -5\n")
    code, err, _ = run_cli(capsys, "generate", "bandit", "--config", str(config), "--out", str(tmp_path / "o"))
    assert code == 2 and "--seed" in err and str(config) in err


def test_the_largest_seed_works(tmp_path, capsys):
    out = tmp_path / "b"
    code, _, _ = run_cli(capsys, "generate", "bandit", "--seed", "2147483647", "--out", str(out), "--instances", "2",
                         "--pulls", "3", "--progress", "false")
    assert code == 0
    from ad.history import HistoryReader

    assert {u["run"] for u in HistoryReader(out).units()} == {2147483647}


# ---------------------------------------------------------------------------- bytes that are not UTF-8
def test_a_config_file_that_is_not_utf8_is_named(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_bytes(b"instances: 2\nout: caf\xe9\n")
    code, err, _ = run_cli(capsys, "generate", "bandit", "--config", str(config))
    assert code == 2 and str(config) in err and "not UTF-8" in err and "line 2" in err


def test_a_problems_file_that_is_not_utf8_is_named(tmp_path, capsys):
    problems = tmp_path / "p.jsonl"
    problems.write_bytes(b'{"question": "q", "answer": "#### 3"}\n{"question": "caf\xe9?", "answer": "#### 4"}\n')
    code, err, _ = run_cli(capsys, "generate", "math", "--problems", str(problems), "--out", str(tmp_path / "m"))
    assert code == 2 and str(problems) in err and "not UTF-8" in err and "line 2" in err


def test_a_prompts_file_that_is_not_utf8_is_named(tmp_path, capsys):
    prompts = tmp_path / "p.txt"
    prompts.write_bytes(b"Write a poem\nDescribe caf\xe9s\n")
    code, err, _ = run_cli(capsys, "generate", "rlhf", "--prompts", str(prompts), "--out", str(tmp_path / "r"))
    assert code == 2 and str(prompts) in err and "not UTF-8" in err and "line 2" in err


def test_an_out_path_that_is_not_utf8_is_refused(tmp_path, capsys):
    out = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9")  # what Python makes of such bytes in argv
    code, err, _ = run_cli(capsys, "generate", "bandit", "--out", out, "--instances", "2", "--pulls", "3")
    assert code == 2 and "--out" in err and "not UTF-8" in err and "0xe9" in err
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------- a remote store out of reach
@pytest.mark.parametrize("command", [["generate", "bandit", "--instances", "2", "--pulls", "3", "--out"],
                                     ["inspect"]])
def test_an_unreachable_bucket_is_one_error_line(tmp_path, capsys, command, monkeypatch):
    """Nothing listens on port 9 of this machine: pyarrow's S3 client fails to connect (after its retries)."""
    monkeypatch.chdir(tmp_path)
    url = "s3://bucket/data?endpoint_override=127.0.0.1:9&scheme=http&region=us-east-1"
    code, err, _ = run_cli(capsys, *command, url)
    assert code == 2 and "bucket" in err and "check the URL, the network and your credentials" in err
    assert os.listdir(tmp_path) == []
