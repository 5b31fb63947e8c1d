"""Guard rail: the same `ad generate` command and seed writes the same transitions, row for row.

Each case runs the command on tiny settings and compares `ad.history.content_hash` (every column of every
stream, in (task, run, stream) order; shard layout and file metadata excluded) with a hash pinned when the
test was written. A refactor that changes any stored value, dtype or row order changes the hash. When a
change to the data is intended, say so in the commit and re-pin the literal.

A source that trains a network (darkroom's A2C) writes floats that depend on the kernels torch picks for the CPU:
its hash is pinned per ``torch.backends.cpu.get_cpu_capability()`` (the same code and seed wrote the AVX2 hash on
an AVX2 CPU and, with ``ATEN_CPU_CAPABILITY=avx2``, on an AVX512 one). On a CPU whose capability has no pinned hash
the case is skipped, naming the hash to pin.
"""
from __future__ import annotations

import pytest

from ad import cli
from ad.history import content_hash

QUIET = ["--progress", "false"]
GRID_QUIET = [*QUIET, "--tensorboard", "false", "--plots", "false", "--threads", "1"]

CASES = {
    "darkroom-a2c": (["generate", "darkroom", "--size", "3", "--steps-per-goal", "400", "--hidden", "16",
                      "--seed", "3", *GRID_QUIET],
                     {"AVX2": "b891c70fb64477da06a64abf8ff3d57899045b276f78cad6169b16275353abf8",
                      "AVX512": "ab8d7246657d860fea4bac6306eb675c64fe1ec852192950c3c92f84e98db6f4"}),
    "darkroom-explorer": (["generate", "darkroom", "--size", "4", "--source", "explorer", "--steps-per-goal", "400",
                           "--num-envs", "2", "--seed", "3", *GRID_QUIET],
                          "84e217aa829de048f4952cdc49af4bfc58f500058429ee2a9c29000172326a94"),
    "keydoor-a2c": (["generate", "keydoor", "--size", "3", "--tasks", "4", "--steps-per-task", "400",
                     "--episode-length", "12", "--hidden", "16", "--seed", "3", *GRID_QUIET],
                    "bf587a72a578dea3417f115d0bf6b521a94460f8287082368421f4edb7f56b13"),
    "bandit-bernoulli-thompson": (["generate", "bandit", "--kind", "bernoulli", "--source", "thompson", "--arms", "3",
                                   "--instances", "6", "--pulls", "40", "--seed", "3", *QUIET],
                                  "28a06832c2d93db49a0294486c8e5ea93ef27b9c32b89cf9d2a90aa79c12717e"),
    "bandit-gaussian-ucb": (["generate", "bandit", "--kind", "gaussian", "--source", "ucb", "--arms", "3",
                             "--instances", "6", "--pulls", "40", "--seed", "3", *QUIET],
                            "b10b2621286e711c95344d60363bd5eefab1c512402583f4adfcc9a0c6c0c012"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generate_writes_the_pinned_rows(tmp_path, case):
    argv, pinned = CASES[case]
    out = tmp_path / case
    assert cli.run([*argv, "--out", str(out)]) == 0
    written = content_hash(out)
    if isinstance(pinned, dict):  # pinned per CPU capability (see the module docstring)
        import torch

        capability = torch.backends.cpu.get_cpu_capability()
        if capability not in pinned:
            pytest.skip(f"no {case} hash pinned for CPU capability {capability}; this CPU wrote {written}")
        pinned = pinned[capability]
    assert written == pinned
