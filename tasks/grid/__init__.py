"""Dark grid rooms, the engine DarkRoom and Key-to-Door share: one family is one configuration of it.

- :mod:`tasks.grid.room`: the room (moves, walls, start cell, shortest paths, the seeded task split) and its
  natively vectorised env, whose reward and task draw each family supplies;
- :mod:`tasks.grid.config`: the A2C and running options, declared once (a family's config takes them with
  :func:`ad.config.override`), and their checks;
- :mod:`tasks.grid.a2c`: the batched A2C, one tabular actor-critic per task, every task in one computation;
- :mod:`tasks.grid.family`: :class:`~tasks.grid.family.GridFamily`, what a family plugs into the sources, and what
  every grid dataset shares (its columns, split, task table and learning figure);
- :mod:`tasks.grid.generate`: the A2C source (batches, resuming, the Ray backend, summary, TensorBoard, pictures);
  :mod:`tasks.grid.rollouts` hands each
  update's rollout to the history writer and counts its returns; :mod:`tasks.grid.plots` draws the run's pictures;
- :mod:`tasks.grid.noise`: the noise-distillation source on the same families.

A family keeps its env, its task names and spec, its optimal actions and a small config choosing the settings
(``tasks/darkroom/``, ``tasks/keydoor/``). Importing this package imports nothing heavy.
"""
