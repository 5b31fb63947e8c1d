"""`ad demo --task T --model M`: every registered demo is reachable, lists its options, refuses bad choices; every
task family registers its generate command and evaluation env through one `register_family` call."""
from __future__ import annotations

import dataclasses

import pytest

from ad import registry
from ad.cli import main, run
from ad.errors import UserError


def test_darkroom_and_bandit_are_task_families_with_generate_eval_and_demo():
    from tasks.bandit.config import GenerateConfig as BanditGenerate
    from tasks.bandit.demo import BanditDemoConfig
    from tasks.darkroom.config import GenerateConfig as DarkRoomGenerate
    from tasks.darkroom.demo import DarkRoomDemoConfig

    for name, generate, demo in (("darkroom", DarkRoomGenerate, DarkRoomDemoConfig),
                                 ("bandit", BanditGenerate, BanditDemoConfig)):
        assert registry.get("generate", name).config_cls is generate
        assert callable(registry.env_factory(name))
        assert registry.get_demo(name, "rl").config_cls is demo
    with pytest.raises(UserError, match="task family 'nope' has no evaluation environment"):
        registry.env_factory("nope")


@pytest.mark.parametrize("pair", list(registry.demos()), ids=lambda p: f"{p[0]}-{p[1]}")
def test_help_of_every_demo_lists_its_options_and_the_selectors(pair, capsys):
    task, model = pair
    with pytest.raises(SystemExit) as exit_info:
        run(["demo", "--task", task, "--model", model, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: ad demo")
    assert "--task {" in text and "--model {" in text
    for field in dataclasses.fields(registry.get_demo(task, model).config_cls):
        if field.init:
            assert "--" + field.name.replace("_", "-") in text


def test_default_demo_is_darkroom_rl(capsys):
    with pytest.raises(SystemExit):
        run(["demo", "--help"])
    assert "--size" in capsys.readouterr().out  # DarkRoom's own option


@pytest.mark.parametrize("argv,message", [
    (["demo", "--task", "nope"], "no demo for --task nope --model rl"),
    (["demo", "--model", "nope"], "no demo for --task darkroom --model nope"),
    (["demo", "--task", "bandit", "--size", "9"], "unrecognized arguments: --size"),  # DarkRoom's, not the bandit's
    (["demo", "--task", "bandit", "--heldout-fraction", "1.0"], "--heldout-fraction must be in (0, 1)"),
])
def test_bad_demo_choices_are_one_line_errors_with_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing written


def test_darkroom_demo_source_options_reach_the_generator(tmp_path):
    from ad.config import make_config
    from tasks.darkroom.demo import DarkRoomDemoConfig

    demo = make_config(DarkRoomDemoConfig, {"source": "a2c", "ent_coef": 0.2, "size": 7, "steps_per_goal": 1000})
    generate = make_config(registry.get("generate", "darkroom").config_cls,
                           {**demo.generate_options(), "out": str(tmp_path / "d")})
    assert (generate.source, generate.ent_coef, generate.size, generate.steps_per_goal,
            generate.terminate_on_goal) == ("a2c", 0.2, 7, 1000, False)
    with pytest.raises(UserError, match="ent-coef"):
        make_config(registry.get("generate", "darkroom").config_cls,
                    {**make_config(DarkRoomDemoConfig, {"source": "a2c", "ent_coef": -1.0}).generate_options(),
                     "out": "x"})
    explorer = make_config(registry.get("generate", "darkroom").config_cls,
                           {**make_config(DarkRoomDemoConfig, {"size": 7}).generate_options(), "out": "x"})
    assert (explorer.source, explorer.size, explorer.steps_per_goal, explorer.num_envs) == ("explorer", 7, 12_000, 10)


@pytest.mark.parametrize("size, streams", [(5, 30), (6, 30), (7, 10), (9, 10), (11, 10)])
def test_darkroom_demo_gives_rooms_with_few_training_goals_more_histories(tmp_path, size, streams):
    from ad.config import make_config
    from tasks.darkroom.demo import DarkRoomDemoConfig

    demo = make_config(DarkRoomDemoConfig, {"size": size})
    generate = make_config(registry.get("generate", "darkroom").config_cls,
                           {**demo.generate_options(), "out": str(tmp_path / "d")})
    assert (generate.num_envs, generate.steps_per_goal) == (streams, streams * 1200)  # 60 episodes per history
    assert dict(demo.runs())["ED"]["context"] == 120  # still the last 6 of 60 episodes
    a2c = make_config(DarkRoomDemoConfig, {"size": size, "source": "a2c"})
    assert (a2c.streams, a2c.steps_per_goal) == (10, 240_000)
    assert make_config(DarkRoomDemoConfig, {"size": size, "streams": 4}).steps_per_goal == 4800
    with pytest.raises(UserError, match="--streams"):
        make_config(DarkRoomDemoConfig, {"size": size, "streams": -1})


def test_darkroom_demo_episode_length_reaches_the_generator_and_the_defaults(tmp_path):
    """--episode-length 100 (the DPT paper's DarkRoom): the explorer still writes 60 episodes a history, ED still
    reads the last 6 of them; the length is the histories' and so the evaluation's."""
    from ad.config import make_config
    from tasks.darkroom.demo import DarkRoomDemoConfig

    demo = make_config(DarkRoomDemoConfig, {"size": 10, "episode_length": 100})
    generate = make_config(registry.get("generate", "darkroom").config_cls,
                           {**demo.generate_options(), "out": str(tmp_path / "d")})
    assert (generate.episode_length, generate.steps_per_goal, generate.num_envs) == (100, 60_000, 10)
    assert dict(demo.runs())["ED"].get("context", demo.context) == 200  # 6 episodes of 100 steps: not cut
    assert make_config(DarkRoomDemoConfig, {"source": "a2c", "episode_length": 100}).steps_per_goal == 240_000
    with pytest.raises(UserError, match="--episode-length"):
        make_config(DarkRoomDemoConfig, {"episode_length": 0})


def test_keydoor_demo_episode_length_reaches_the_generator_and_dpts_random_contexts(tmp_path):
    from ad.config import make_config
    from tasks.keydoor.demo import KeyDoorDemoConfig

    generate_cls = registry.get("generate", "keydoor").config_cls
    demo = make_config(KeyDoorDemoConfig, {"episode_length": 100, "tasks": 20, "methods": "ad,dpt",
                                           "dpt_data": "random"})
    for options in (demo.generate_options(), {**demo.generate_options(), **demo.dpt_context_options()}):
        assert make_config(generate_cls, {**options, "out": str(tmp_path / "d")}).episode_length == 100
    assert make_config(KeyDoorDemoConfig, {}).generate_options()["episode_length"] == 50  # the AD paper's
    with pytest.raises(UserError, match="--episode-length"):
        make_config(KeyDoorDemoConfig, {"episode_length": 0})
    short = make_config(KeyDoorDemoConfig, {"episode_length": 3, "tasks": 20})  # no pair is 3 steps from the start
    with pytest.raises(UserError, match="--episode-length 3 is too short"):
        make_config(generate_cls, {**short.generate_options(), "out": str(tmp_path / "d")})


@pytest.mark.parametrize("values, expected, ed_context", [
    ({}, (1, 200, 4000, 12_000), 120), ({"source": "a2c"}, (40, 80, 5000, 240_000), 80),
    ({"subsample": 2, "context": 100, "ad_steps": 10, "steps_per_goal": 400}, (2, 100, 10, 400), 20),
    ({"source": "a2c", "context": 60}, (40, 60, 5000, 240_000), 60), ({"context": 100}, (1, 100, 4000, 12_000), 100)])
def test_darkroom_demo_options_left_at_zero_take_the_source_default(values, expected, ed_context):
    from ad.config import make_config
    from tasks.darkroom.demo import DarkRoomDemoConfig

    demo = make_config(DarkRoomDemoConfig, values)
    assert (demo.subsample, demo.context, demo.ad_steps, demo.steps_per_goal) == expected
    runs = dict(demo.runs())
    assert runs["AD"] == {"max_steps": expected[2], "subsample": expected[0], "objective": "ad"}
    # ED reads the last 10% of each stream's episodes (the explorer's 60 leave 6, 120 transitions): its context is
    # cut to that where the demo's is longer
    assert runs["ED"].get("context", demo.context) == ed_context


@pytest.mark.parametrize("values, dropout", [({"size": 5, "source": "a2c"}, 0.1), ({"size": 7, "source": "a2c"}, 0.1),
                                             ({"size": 9, "source": "a2c"}, 0.0), ({"size": 11, "source": "a2c"}, 0.0),
                                             ({"size": 5}, 0.0), ({"size": 11, "dropout": 0.3}, 0.3),
                                             ({"size": 5, "source": "a2c", "dropout": 0.0}, 0.0)])
def test_darkroom_demo_dropout_follows_the_source_and_room_size_unless_given(values, dropout):
    from ad.config import make_config
    from tasks.darkroom.demo import DarkRoomDemoConfig

    options = make_config(DarkRoomDemoConfig, values).train_options()
    assert options["attn_dropout"] == options["resid_dropout"] == dropout


@pytest.mark.parametrize("bad", [1.0, -0.5, float("nan"), float("inf")])
def test_demo_dropout_out_of_range_is_a_user_error(bad):
    from ad.config import make_config
    from tasks.darkroom.demo import DarkRoomDemoConfig

    with pytest.raises(UserError, match="dropout"):
        make_config(DarkRoomDemoConfig, {"dropout": bad})


@pytest.mark.parametrize("task", ["darkroom", "bandit", "keydoor"])
def test_a_misspelt_train_override_stops_every_demo_before_any_work(task, capsys, tmp_path):
    """The pipeline checks every run's `ad train` options before the first stage (nothing generated, no folder)."""
    out = tmp_path / "demo"
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--task", task, "--out", str(out), "--train-overrides", '{"n_layers": 2}'])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "n_layers" in err and "Traceback" not in err
    assert not out.exists()


def test_generate_overrides_reach_the_source_and_a_bad_one_stops_the_demo_before_it_writes(tmp_path):
    from ad.demo import run_ad_demo
    from tasks.lunarlander.demo import LunarLanderDemoConfig

    out = tmp_path / "demo"
    demo = LunarLanderDemoConfig(out=str(out), swap_fraction=1.0,
                                 generate_overrides={"minibatches": 16, "gamma": 0.999, "learning_rate": 3e-4})
    cfg = demo.generate_config()
    assert (cfg.minibatches, cfg.gamma, cfg.learning_rate, cfg.swap_fraction) == (16, 0.999, 3e-4, 1.0)
    assert cfg.gae_lambda == LunarLanderDemoConfig(out=str(out)).generate_config().gae_lambda  # not overridden
    with pytest.raises(UserError, match="unknown option.*minibatch"):
        run_ad_demo(LunarLanderDemoConfig(out=str(out), generate_overrides={"minibatch": 16}))
    assert not out.exists()
