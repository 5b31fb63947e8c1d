"""The Key-to-Door source: DarkRoom's batched A2C (one tabular agent per task, all tasks in one computation)
over (cell, key carried) states.

The source algorithm may see the full state, so each agent's tables have ``2 * size**2`` rows: cell ``c`` without
the key is state ``c``, with it ``c + size**2`` (:class:`~tasks.keydoor.vector_env.KeyDoorVectorEnv` with
``observe_key``). The learning history stores the observed cell only (and the flag in a ``key`` column, for
analysis): the transformer must infer the flag from the rewards in its context.
"""
from __future__ import annotations

from tasks.darkroom.a2c import BatchedA2C
from tasks.keydoor.vector_env import KeyDoorVectorEnv


class KeyDoorA2C(BatchedA2C):
    """A2C agents for Key-to-Door ``goals`` = (key row, key col, door row, door col) tuples, one per task."""

    @staticmethod
    def num_states(cfg) -> int:
        """(cell, key carried): twice the room's cells."""
        return 2 * cfg.size * cfg.size

    def make_env(self, cfg) -> KeyDoorVectorEnv:
        return KeyDoorVectorEnv(self.goals, cfg.num_envs, cfg.size, cfg.episode_length, cfg.random_start,
                                observe_key=True)
