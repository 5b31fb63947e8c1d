"""--dtype: bfloat16 on a CPU that only emulates it gets a warning naming the faster choice."""
from __future__ import annotations

import pytest

from ad.config import groups as options
from ad.config.groups import cpu_has_fast_bfloat16


@pytest.mark.parametrize("flags, expected", [("fpu avx2 fma", False), ("avx2 avx512f avx512_bf16", True),
                                             ("avx2 amx_bf16 amx_tile", True)])
def test_cpu_flags_decide_whether_bfloat16_is_fast(tmp_path, flags, expected):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert cpu_has_fast_bfloat16(str(info)) is expected
    assert cpu_has_fast_bfloat16(str(tmp_path / "absent")) is None


def test_bfloat16_on_an_emulating_cpu_warns_once_with_the_fix(monkeypatch, capsys):
    from ad.config import make_config
    from tasks.textworld.config import GenerateConfig

    monkeypatch.setattr(options, "cpu_has_fast_bfloat16", lambda: False)
    monkeypatch.setattr(options, "_cuda_available", lambda: False)
    make_config(GenerateConfig, {"dtype": "bfloat16"})
    err = capsys.readouterr().err
    assert err.count("warning: --dtype bfloat16") == 1 and "--dtype float32" in err
    make_config(GenerateConfig, {"dtype": "float32"})
    monkeypatch.setattr(options, "cpu_has_fast_bfloat16", lambda: True)
    make_config(GenerateConfig, {"dtype": "bfloat16"})
    assert capsys.readouterr().err == ""
