"""Models trained on learning histories: `models.rl` (RL format) and `models.lm` (Language format)."""
