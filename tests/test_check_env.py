"""Every Gymnasium id the toolkit's task families register (the ``ad/`` namespace, collected from gymnasium's
registry after loading every task plugin, so a new family's ids are checked without listing them here): gymnasium's
``check_env`` on the single env, and where an id has a ``vector_entry_point``, ``gymnasium.make_vec`` builds the
family's own vector env, which steps like the single envs in a ``SyncVectorEnv`` (same-step autoreset)."""
from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from ad.errors import UserError
from ad.registry import ENTRY_POINT_GROUP, env_factory, load_plugins, plugin_modules

NAMESPACE = "ad"


def registered_ids() -> list[str]:
    """The ids registered in the toolkit's namespace once every task family is loaded."""
    load_plugins(groups=(ENTRY_POINT_GROUP,))
    return sorted(i for i, spec in gymnasium.registry.items() if spec.namespace == NAMESPACE)


IDS = registered_ids()
VECTOR_IDS = [i for i in IDS if gymnasium.spec(i).vector_entry_point is not None]


def family_of(gym_id: str) -> str:
    """The task plugin whose module holds the id's entry point."""
    module = gymnasium.spec(gym_id).entry_point.partition(":")[0]
    return next(name for name, value in plugin_modules((ENTRY_POINT_GROUP,))
                if module.startswith(value.partition(":")[0] + "."))


def evaluated_in_context(family: str) -> bool:
    try:
        env_factory(family)
    except UserError:
        return False
    return True


def test_ids_of_families_evaluated_in_context_have_a_vector_entry_point():
    assert {"ad/DarkRoom-9x9-v0", "ad/DarkKeyToDoor-9x9-v0", "ad/BernoulliBandit-v0"} <= set(IDS)
    in_context = [i for i in IDS if evaluated_in_context(family_of(i))]
    assert {"ad/DarkRoom-9x9-v0", "ad/DarkKeyToDoor-9x9-v0", "ad/BernoulliBandit-v0"} <= set(in_context)
    assert set(in_context) <= set(VECTOR_IDS)


@pytest.mark.parametrize("gym_id", IDS)
def test_check_env(gym_id):
    env = gymnasium.make(gym_id)
    try:
        check_env(env.unwrapped, skip_render_check=not env.metadata.get("render_modes"))
    finally:
        env.close()


@pytest.mark.parametrize("gym_id", VECTOR_IDS)
def test_vector_entry_point_steps_like_single_envs(gym_id):
    n, steps = 3, 60  # past the end of the first episodes of the grids' ids
    vec = gymnasium.make_vec(gym_id, num_envs=n)  # the vector entry point is gymnasium's default when registered
    ref = SyncVectorEnv([lambda: gymnasium.make(gym_id) for _ in range(n)], autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP and vec.num_envs == n
        assert vec.single_observation_space == ref.single_observation_space
        assert vec.single_action_space == ref.single_action_space
        got, want = vec.reset(seed=7)[0], ref.reset(seed=7)[0]
        np.testing.assert_allclose(got, want, rtol=1e-6)
        space = ref.single_action_space
        space.seed(0)
        for _ in range(steps):
            actions = np.stack([space.sample() for _ in range(n)])
            got, want = vec.step(actions), ref.step(actions)
            for x, y in zip(got[:4], want[:4]):  # observations, rewards, terminations, truncations
                np.testing.assert_allclose(x, y, rtol=1e-6)
            assert vec.observation_space.contains(got[0])
    finally:
        vec.close()
        ref.close()


DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("family, dataset", [("darkroom", "main-1ae905f/darkroom3"),
                                             ("keydoor", "main-df536fc/keydoor3"), ("bandit", "main-df536fc/bandit3")])
def test_ad_eval_builds_its_envs_with_make_vec(family, dataset):
    """`ad eval`'s envs are the family's registered vector env, made by `gymnasium.make_vec` from what an older
    dataset recorded (no evaluation module per family)."""
    meta = json.loads((DATA / dataset / "dataset.json").read_text())
    tasks = meta["split"]["heldout"]
    setup = env_factory(family)(meta, tasks, 2)
    try:
        assert setup.env.spec.kwargs["vectorization_mode"] == "vector_entry_point"
        assert setup.env.spec.id in VECTOR_IDS and family_of(setup.env.spec.id) == family
        assert setup.env.num_envs == 2 * len(tasks) and setup.tasks == tasks and setup.optimal.shape == (len(tasks),)
        assert setup.num_actions == setup.env.single_action_space.n
    finally:
        setup.env.close()
