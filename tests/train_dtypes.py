"""Floating-point facts the numerical tests derive their bounds from (see each test's comment for its derivation).

The CPU backend trains in fp32 (AVX2-only CPUs) or bf16 (CPUs with a native bf16 path: AVX512-bf16/AMX), whichever
``--ds.param_dtype auto`` picks (``gaca_openrlhf.cpu.resolve_param_dtype``); ``$GACA_CPU_DTYPE`` forces one. Tests
whose outcome depends on the dtype run under both (:data:`TRAIN_DTYPES`), so a developer on either CPU family sees
what breaks on the other.
"""
import torch

#: the CPU backend's two training dtypes, as ``--ds.param_dtype`` spells them
TRAIN_DTYPES = ("fp32", "bf16")
TORCH_DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16}


def unit_roundoff(dtype: str) -> float:
    """u = 2^-p for a format with p significand bits (implicit bit included): round-to-nearest moves any value x
    within its binade by at most u * |x| (fp32: p = 24, u = 6.0e-8; bf16: p = 8, u = 3.9e-3)."""
    return float(torch.finfo(TORCH_DTYPE[dtype]).eps) / 2
