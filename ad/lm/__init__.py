"""The LM layer shared by ``models.lm`` and the LM task families (textworld, gridworld, math, rlhf).

- :mod:`ad.lm.pretrained`: find and load a base causal LM + tokenizer, offline.
- :mod:`ad.lm.scoring`: score an env's valid actions with a causal LM (one KV cache, shared prefixes).
- :mod:`ad.lm.kv_cache`: a KV cache that grows in place (the LM policy's and the group sampler's).
- :mod:`ad.lm.agents`: the actor / critic / reward protocols an LM task's training loop needs.

Importing this package imports nothing else (no torch).
"""
