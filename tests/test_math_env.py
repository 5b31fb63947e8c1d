"""The math Gymnasium env: registered, passes gymnasium's env checker, single- and multi-step episodes."""
import gymnasium
from gymnasium.utils.env_checker import check_env

import tasks.math  # noqa: F401  (registers the env)
from tasks.math.env import MathEnv
from tasks.math.problems import make_problem


def test_registered_env_passes_the_checker():
    env = gymnasium.make("ad/MathWordProblems-v0")
    check_env(env.unwrapped, skip_render_check=True)
    env = gymnasium.make("ad/MathWordProblems-v0", multi_step=True, max_steps=3)
    check_env(env.unwrapped, skip_render_check=True)


def test_single_step_rewards_the_right_final_answer():
    problem = make_problem("apples", 2, 3)
    env = MathEnv(format_reward=0.1)
    obs, info = env.reset(seed=0, options={"problem": problem})
    assert obs == problem.question and info["problem_id"] == problem.id
    _, reward, terminated, truncated, info = env.step(f"so\n#### {problem.answer}")
    assert (reward, terminated, truncated, info["correct"]) == (1.1, True, False, True)
    env.reset(options={"problem": problem})
    _, reward, *_ = env.step(f"maybe {problem.answer + 1}")
    assert reward == 0.0


def test_seeded_resets_repeat_problems():
    a, b = MathEnv(level=3), MathEnv(level=3)
    assert [a.reset(seed=s)[0] for s in range(5)] == [b.reset(seed=s)[0] for s in range(5)]


def test_multi_step_observes_the_steps_and_stops_at_a_final_answer_or_the_limit():
    problem = make_problem("coins", 2, 1)
    env = MathEnv(multi_step=True, max_steps=3)
    env.reset(options={"problem": problem})
    obs, reward, terminated, truncated, _ = env.step("First add the coins.")
    assert obs == problem.question + "\nFirst add the coins." and (reward, terminated, truncated) == (0, False, False)
    obs, reward, terminated, truncated, _ = env.step(f"#### {problem.answer}")
    assert (reward, terminated, truncated) == (1.0, True, False)
    env.reset(options={"problem": problem})
    results = [env.step(f"step {i}")[1:4] for i in range(3)]
    assert results[-1] == (0.0, False, True) and all(not r[2] for r in results[:2])
