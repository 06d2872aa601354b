"""Published reference numbers (from the project's FACTS.md "Reference numbers"), never measured here.

They are printed in their own section of the report, labelled with their source, and never mixed into the
tables of measured numbers. Success rates in percent. Each benchmark's numbers and its part of the papers' setup live
with its environment (:attr:`agents.base.EnvSpec.benchmark`, ``agents/<env>/benchmark.py``).
"""
from __future__ import annotations

#: other published figures (source, what, value)
PAPER_NOTES: list[tuple[str, str, str]] = [
    ("GACA paper", "GACA's added cost per iteration", "0.09 s per ~372 s iteration"),
    ("GACA paper", "frozen-policy mean lambda", "0.7484"),
    ("GACA paper", "frozen-policy share of steps at lambda = 1", "2.68%"),
]

#: verl-agent / paper training defaults the GPU launch scripts use, common to the benchmarks (each adds its own part,
#: :func:`setup`)
COMMON_SETUP = ("16 tasks x 8 rollouts per iteration, 150 iterations, lr 1e-6, KL loss 0.01 (low_var_kl), entropy "
                "0.001, clip 0.2, gamma 0.95, invalid-action penalty 0.1, history 2, train T 1.0 / eval T 0.4")


def benchmarks() -> list:
    """The specs of the registered environments that stand for a published benchmark, in registry order."""
    from agents.registry import specs

    return [s for s in specs() if s.benchmark is not None]


def paper_results() -> list[tuple[str, str, str, str, float]]:
    """(source, benchmark, model, method / setting, success %) of every benchmark, grouped by source (in order of
    first appearance), then by benchmark (registry order)."""
    rows = [(r.source, s.title, r.model, r.setting, r.success) for s in benchmarks() for r in s.benchmark.results]
    sources = list(dict.fromkeys(row[0] for row in rows))
    return sorted(rows, key=lambda row: sources.index(row[0]))  # stable: each benchmark's order is kept


def setup() -> str:
    """The papers' training setup: the common defaults, then each benchmark's part (``ALFWorld prompt 2048 ...``)."""
    return "; ".join([COMMON_SETUP] + [f"{s.title} {s.benchmark.setup}" for s in benchmarks() if s.benchmark.setup])
