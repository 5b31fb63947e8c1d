"""benchmarks/metaworld_misses.py: the fingertips' closest approach to the goal in each in-context episode."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.metaworld_misses import SUCCESS_RADIUS, ClosestApproach, found_before, miss_summary  # noqa: E402


class Steer:
    """Steers the fingertips of the first ``reaching`` sub-envs to their goal (read from the env, as no learner
    may); the others stand still."""

    def __init__(self, env, reaching):
        self.env, self.reaching = env, reaching

    def reset(self, num_envs):
        pass

    def act(self, obs, prev_action, prev_reward, timestep, first):
        tcp = np.stack([sub.mw_env.tcp_center for sub in self.env.envs])
        goal = np.asarray(self.env.expert_observations())[:, -3:]
        move = np.clip(50.0 * (goal - tcp), -1.0, 1.0)
        move[self.reaching:] = 0.0
        return np.concatenate([move, np.zeros((len(move), 1))], axis=1).astype(np.float32)


def test_closest_approach_decides_success_as_meta_world_does():
    from ad.evaluate import EvalEnv, run_in_context
    from tasks.metaworld.vector_env import MetaWorldVectorEnv

    env = MetaWorldVectorEnv("reach-v3", [("test", 0), ("test", 1), ("test", 2)], episode_length=60)
    try:
        setup = EvalEnv(env, ["a", "b", "c"], 1, np.ones(3), 0, env.single_action_space)
        record = ClosestApproach(env, 3, 2)
        result = run_in_context(Steer(env, reaching=2), setup, 2, 0, progress=False, record=record)
    finally:
        env.close()
    success = result.extra["success"].reshape(3, 2)
    assert success[:2].all() and not success[2].any()
    np.testing.assert_array_equal(success, record.closest <= SUCCESS_RADIUS)
    assert (record.closest[:2] < 0.02).all() and (record.closest[2] > 0.1).all()  # goals start 10+ cm away


def test_miss_summary_reads_only_the_failed_episodes():
    closest = np.array([[0.01, 0.06], [0.20, 0.07]])
    success = closest <= SUCCESS_RADIUS
    got = miss_summary(closest, success, found_before(success))
    assert got["failed"] == 3 and got["near_share"] == pytest.approx(2 / 3) and got["median_cm"] == pytest.approx(7.0)
    assert got["after_success_share"] == pytest.approx(1 / 3)  # goal 0 failed after its success; goal 1 never found
    assert miss_summary(closest[:1, :1], success[:1, :1], found_before(success[:1, :1]))["failed"] == 0


def test_found_before_marks_the_episodes_after_a_goals_first_success():
    success = np.array([[False, True, False, False], [False, False, False, True], [True, False, True, False]])
    np.testing.assert_array_equal(found_before(success), [[False, False, True, True], [False, False, False, False],
                                                          [False, True, True, True]])


@pytest.mark.parametrize("argv, message", [
    (["--last", "0"], "--last must be in 1..--episodes"),
    (["--work", "nowhere"], "does not exist: run the metaworld_ad config"),
])
def test_bad_options_end_with_one_error_line(argv, message, tmp_path, capsys, monkeypatch):
    from benchmarks import metaworld_misses
    from cli_run import script_error

    monkeypatch.chdir(tmp_path)
    assert message in script_error(capsys, monkeypatch, metaworld_misses.main, "metaworld_misses.py", *argv)
