"""Guard rail: the same `ad generate` command and seed writes the same transitions, row for row.

Each case runs the command on tiny settings and compares `ad.history.content_hash` (every column of every
stream, in (task, run, stream) order; shard layout and file metadata excluded) with a hash pinned when the
test was written. A refactor that changes any stored value, dtype or row order changes the hash. When a
change to the data is intended, say so in the commit and re-pin the literal.

A source that trains a network (the grid A2C) writes floats that depend on the kernels torch picks for the CPU:
its hash is pinned per ``torch.backends.cpu.get_cpu_capability()`` and CPU vendor: an AMD and an Intel CPU of the
same capability write different floats. The AVX2 hashes were written with ``ATEN_CPU_CAPABILITY=avx2`` on AVX512
CPUs (on the AMD one also on an AVX2 CPU, the same hash). On a CPU with no pinned hash the case is skipped, naming the
hash to pin.
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
                     {"AVX2 AuthenticAMD": "b891c70fb64477da06a64abf8ff3d57899045b276f78cad6169b16275353abf8",
                      "AVX2 GenuineIntel": "01f39d79dab2a36f9dbdf82b25b16eb6af542b67944d7ba13f23b68a0bf0c34a",
                      "AVX512 AuthenticAMD": "ab8d7246657d860fea4bac6306eb675c64fe1ec852192950c3c92f84e98db6f4",
                      "AVX512 GenuineIntel": "3a4c24aba0edd8fdbb484d0b3801b1856dc4587d89168d192bd0639e92d07937"}),
    "darkroom-explorer": (["generate", "darkroom", "--size", "4", "--source", "explorer", "--steps-per-goal", "400",
                           "--num-envs", "2", "--seed", "3", *GRID_QUIET],
                          "84e217aa829de048f4952cdc49af4bfc58f500058429ee2a9c29000172326a94"),
    "keydoor-a2c": (["generate", "keydoor", "--size", "3", "--tasks", "4", "--steps-per-task", "400",
                     "--episode-length", "12", "--hidden", "16", "--seed", "3", *GRID_QUIET],
                    {"AVX2 GenuineIntel": "766c4c9fe0f3b6f8c36b44b4a40f0ab539e1adaf9d3739f954ec8b18b66a4946",
                     "AVX512 AuthenticAMD": "bf587a72a578dea3417f115d0bf6b521a94460f8287082368421f4edb7f56b13",
                     "AVX512 GenuineIntel": "766c4c9fe0f3b6f8c36b44b4a40f0ab539e1adaf9d3739f954ec8b18b66a4946"}),
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
    if isinstance(pinned, dict):  # pinned per CPU capability and vendor (see the module docstring)
        keys = cpu_keys()
        if not any(key in pinned for key in keys):
            pytest.skip(f"no {case} hash pinned for this CPU ({keys[0]}); it wrote {written}")
        pinned = next(pinned[key] for key in keys if key in pinned)
    assert written == pinned


def cpu_keys() -> list[str]:
    """The keys a hash may be pinned under on this CPU, the most specific first: "<capability> <vendor>" (e.g.
    "AVX512 GenuineIntel", the vendor from /proc/cpuinfo where there is one), then "<capability>"."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    try:
        with open("/proc/cpuinfo") as info:
            vendor = next((line.split(":", 1)[1].strip() for line in info if line.startswith("vendor_id")), "")
    except OSError:
        vendor = ""
    return [f"{capability} {vendor}", capability] if vendor else [capability]
