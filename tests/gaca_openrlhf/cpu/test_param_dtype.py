"""``--ds.param_dtype auto``: which dtype a run trains and samples in, by backend and CPU."""
import pytest

import gaca_openrlhf.cpu as cpu
from gaca_openrlhf.cpu import resolve_param_dtype


@pytest.fixture(autouse=True)
def _no_forced_dtype(monkeypatch):
    """These tests state what ``auto`` means on a CPU; a developer's own GACA_CPU_DTYPE must not decide them."""
    monkeypatch.delenv(cpu.CPU_DTYPE_ENV, raising=False)


def test_auto_is_bf16_on_gpus_and_on_cpus_with_native_bf16(monkeypatch):
    monkeypatch.setattr(cpu, "fast_bf16", lambda: True)
    assert [resolve_param_dtype("auto", m) for m in ("gpu", "cpu", "rehearsal")] == ["bf16"] * 3
    monkeypatch.setattr(cpu, "fast_bf16", lambda: False)
    assert [resolve_param_dtype("auto", m) for m in ("gpu", "cpu", "rehearsal")] == ["bf16", "fp32", "fp32"]


def test_explicit_dtypes_are_kept_and_fp32_is_cpu_only(monkeypatch):
    monkeypatch.setattr(cpu, "fast_bf16", lambda: False)
    assert resolve_param_dtype("bf16", "cpu") == "bf16" and resolve_param_dtype("fp16", "gpu") == "fp16"
    assert resolve_param_dtype("fp32", "cpu") == "fp32" and resolve_param_dtype("fp32", "rehearsal") == "fp32"
    with pytest.raises(ValueError, match="CPU backend"):
        resolve_param_dtype("fp32", "gpu")
    with pytest.raises(ValueError, match="must be one of"):
        resolve_param_dtype("fp64", "cpu")


@pytest.mark.parametrize("native", [True, False])
def test_gaca_cpu_dtype_forces_auto_on_the_cpu_backend_only(monkeypatch, native):
    """GACA_CPU_DTYPE runs a machine's other dtype path (fp32 on an AMX CPU, bf16 on an AVX2 one): it decides ``auto``
    on the CPU backend and the rehearsal, whatever the CPU; explicit dtypes and GPU runs ignore it."""
    monkeypatch.setattr(cpu, "fast_bf16", lambda: native)
    for forced in ("fp32", "bf16", " BF16 "):
        monkeypatch.setenv(cpu.CPU_DTYPE_ENV, forced)
        want = forced.strip().lower()
        assert [resolve_param_dtype("auto", m) for m in ("cpu", "rehearsal")] == [want, want]
        assert resolve_param_dtype("auto", "gpu") == "bf16"
        assert resolve_param_dtype("fp32", "cpu") == "fp32" and resolve_param_dtype("bf16", "cpu") == "bf16"
    monkeypatch.setenv(cpu.CPU_DTYPE_ENV, "")  # empty = unset: the CPU decides
    assert resolve_param_dtype("auto", "cpu") == ("bf16" if native else "fp32")
    monkeypatch.setenv(cpu.CPU_DTYPE_ENV, "fp16")
    with pytest.raises(ValueError, match="GACA_CPU_DTYPE must be one of"):
        resolve_param_dtype("auto", "cpu")


def test_fast_bf16_reads_this_cpu():
    """Agrees with a measurement: where oneDNN has a bf16 path, a bf16 matmul is not far slower than fp32."""
    import time

    import torch

    a32, b32 = torch.randn(256, 256), torch.randn(256, 256)
    a16, b16 = a32.bfloat16(), b32.bfloat16()

    def best(a, b):
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(4):
                a @ b
            ts.append(time.perf_counter() - t)
        return min(ts)

    ratio = best(a16, b16) / best(a32, b32)
    # measured: ~13x on an AVX2-only VM (scalar reference kernel); ~1x or faster with oneDNN's bf16 path
    assert cpu.fast_bf16() == (ratio < 4), ratio
