"""Dark Key-to-Door (the Algorithm Distillation paper's second environment) and its batched A2C source (in progress)."""
