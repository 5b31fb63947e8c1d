"""Dark grid rooms, the engine DarkRoom and Key-to-Door share: one family is one configuration of it.

- :mod:`tasks.grid.room`: the room (moves, walls, start cell, shortest paths, the seeded task split), its single env
  and its natively vectorised env, whose reward and task draw each family supplies;
- :mod:`tasks.grid.family`: what a family configures: the options its sources share (declared once, taken with
  :func:`ad.config.override`) and their checks, :class:`~tasks.grid.family.GridFamily` (its tasks, names, metadata
  and env, plugged into the sources), and what every grid dataset shares (columns, split, learning figure);
- :mod:`tasks.grid.a2c`: the batched A2C, one tabular actor-critic per task, every task in one computation;
- :mod:`tasks.grid.generate`: the A2C source (batches, resuming, the Ray backend, summary, TensorBoard, pictures),
  with :mod:`tasks.grid.rollouts` (each update's rollout to the history writer and the return tracker) and
  :mod:`tasks.grid.plots` (the run's pictures);
- :mod:`tasks.grid.noise`: the noise-distillation source on the same families.

A family keeps its env, its task names and spec, its optimal actions and a small config choosing the settings
(``tasks/darkroom/``, ``tasks/keydoor/``). Importing this package imports nothing heavy.
"""
