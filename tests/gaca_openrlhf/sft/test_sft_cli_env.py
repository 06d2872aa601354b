"""``python -m gaca_openrlhf.sft`` pins MKL's GEMM code path before torch loads (notebook §11)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROBE = ("import json, os, sys; import gaca_openrlhf.sft.__main__ as m; "
         "print(json.dumps([os.environ.get('MKL_CBWR'), 'torch' in sys.modules, m.MKL_CBWR_DEFAULT]))")


def _probe(env_value):
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    if env_value is not None:
        env["MKL_CBWR"] = env_value
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH", "")) if x)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("given, expected", [(None, "AVX2"), ("COMPATIBLE", "COMPATIBLE")])
def test_sft_cli_sets_mkl_cbwr_before_torch_and_keeps_a_users_value(given, expected):
    """Catches: the default not set, a user's MKL_CBWR overwritten, or torch (hence MKL) loaded before the variable is
    set, where MKL would ignore it."""
    value, torch_loaded, default = _probe(given)
    assert (value, torch_loaded, default) == (expected, False, "AVX2")
