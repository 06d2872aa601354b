"""The machine a record ran on, named as the records name it: the CPU model and its matrix path, and the dtype of
each phase (results move with both)."""
from __future__ import annotations

import platform
from pathlib import Path


def simd_label(flags: set[str]) -> str:
    """The widest matrix path among a CPU's ``/proc/cpuinfo`` flags, named as the records name CPU families: ``AMX``
    (Intel tile units, bf16), ``AVX512-bf16`` (AVX512 with bf16 dot products, e.g. AMD Zen 4), ``AVX512``, ``AVX2``.
    Each is named only when its own flag is there: an AVX512-bf16 CPU without AMX is not an AMX machine."""
    if "amx_bf16" in flags or "amx_tile" in flags:
        return "AMX"
    if "avx512_bf16" in flags:
        return "AVX512-bf16"
    if "avx512f" in flags:
        return "AVX512"
    return "AVX2" if "avx2" in flags else "no AVX2"


def cpu_model() -> str:
    """This machine's CPU model name and its matrix path (:func:`simd_label`; what decides the CPU backend's
    training dtype and, through rounding, the numbers a run gives)."""
    name = platform.processor() or ""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        name = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), name)
        flags = next((ln.split(":", 1)[1].split() for ln in lines if ln.startswith("flags")), [])
        simd = simd_label(set(flags))
    except OSError:
        simd = "?"
    return f"{name} ({simd})"


def machine_line(cpu: str, dtypes: dict | None) -> str:
    """The CPU and, where the run recorded them (run.json's ``dtypes``, since 2026-12-04), the dtype each phase
    computed in: results move with both (the CPU backend trains in bf16 on AVX512-bf16/AMX CPUs, fp32 elsewhere)."""
    if not dtypes:
        return cpu
    return cpu + "; dtypes: " + ", ".join(f"{phase} {dtypes[phase]}" for phase in ("sft", "rl", "eval") if phase in dtypes)
