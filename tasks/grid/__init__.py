"""Dark grid rooms, the engine DarkRoom and Key-to-Door share: one family is one configuration of it.

:mod:`tasks.grid.room` (the room, its single and vectorised envs), :mod:`tasks.grid.family` (what a family
configures, and what every grid dataset shares), :mod:`tasks.grid.a2c` (the batched A2C), :mod:`tasks.grid.generate`
(the A2C source, with :mod:`tasks.grid.rollouts` and :mod:`tasks.grid.plots`) and :mod:`tasks.grid.noise` (the
noise-distillation source). A family keeps its env, task names, optimal actions and a small config
(``tasks/darkroom/``, ``tasks/keydoor/``). Importing this package imports nothing heavy.
"""
