"""Preallocated arrays that hold a recorder's single steps (streams 0..n-1 each) until its next flush.

Filling a row costs one array assignment a value (converted to the column's type as it is copied); the block goes to
the flush as one (time, stream) batch, so nothing is converted per step twice. A value that does not fit its row
exactly (another size, a GPU tensor) is refused by :meth:`StepBlock.put`, and the recorder then keeps that step as
given: the flush checks it and names what is wrong, as for any step.
"""
from __future__ import annotations

from typing import Any

import numpy as np

#: Python and numpy scalars: one value, immutable.
SCALARS = (int, float, bool, np.generic)


class StepBlock:
    """Up to ``capacity`` consecutive steps of ``n`` streams: obs, action, reward, terminated, truncated, logprob,
    update and (with ``value``) value, each an array with leading dimensions (capacity, n)."""

    def __init__(self, n: int, capacity: int, obs: tuple[tuple[int, ...], Any], action: tuple[tuple[int, ...], Any],
                 value: bool) -> None:
        self.n, self.t = n, 0
        self.arrays = [np.empty((capacity, n, *obs[0]), obs[1]), np.empty((capacity, n, *action[0]), action[1]),
                       np.empty((capacity, n), np.float32), np.empty((capacity, n), bool),
                       np.empty((capacity, n), bool), np.empty((capacity, n), np.float32),
                       np.empty((capacity, n), np.int64), np.empty((capacity, n), np.float32) if value else None]
        # values a step must give: exactly one a stream (update: one for all streams too)
        self._sizes = [n * int(np.prod(obs[0])), n * int(np.prod(action[0])), n, n, n, n, n, n]

    def put(self, values: tuple[Any, ...]) -> bool:
        """Copy one step's values into the next row; False (nothing kept) where one does not fit it exactly."""
        t, one = self.t, self.n == 1
        try:
            for i, (array, value) in enumerate(zip(self.arrays, values)):
                if array is None:
                    continue
                if isinstance(value, SCALARS):
                    if self._sizes[i] != 1 and i != 6:  # one value for several streams: only update may
                        return False
                    if one and array.ndim == 2:
                        array[t, 0] = value  # a scalar into one element (a row assignment costs twice as much)
                    else:
                        array[t] = value
                    continue
                if type(value) is np.ndarray:
                    size = value.size
                elif hasattr(value, "numel"):  # a torch tensor on the CPU, without grad: through its numpy view
                    size, value = value.numel(), value.numpy()
                else:
                    return False
                if size != self._sizes[i] and not (size == 1 and i == 6):
                    return False
                array[t] = value  # a value of another shape (of the same size) is refused here too
        except (TypeError, RuntimeError, ValueError):
            return False
        self.t = t + 1
        return True

    def taken(self) -> tuple[Any, ...]:
        """The rows filled so far, as a (time, stream) batch."""
        return tuple(None if a is None else a[:self.t] for a in self.arrays)
