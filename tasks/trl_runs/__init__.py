"""The engine shared by the families whose source is a TRL trainer (RLHF's GRPO, math's RLOO): every sampled
completion logged as a history row, one unit per chunk of training iterations committed right after the trainer
saved that chunk's checkpoint, and resume from the last committed chunk. Not a family: it registers nothing."""
