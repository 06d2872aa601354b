"""ALFWorld as the papers' benchmark: their published success rates (the project's FACTS.md "Reference numbers"),
its part of their training setup, and how the comparison report names generated ALFWorld data."""
from agents.base import Benchmark, PublishedResult
from agents.papers import GACA, GIGPO, QWEN_1_5B as SMALL, QWEN_7B as LARGE

BENCHMARK = Benchmark(
    results=(
        PublishedResult(GACA, SMALL, "GACA (lambda0 = alpha = 0.5)", 96.88),
        PublishedResult(GACA, SMALL, "best fixed lambda (0.5)", 93.05),
        PublishedResult(GACA, SMALL, "episode only (lambda = 0)", 85.94),
        PublishedResult(GACA, SMALL, "step only (lambda = 1)", 84.60),
        PublishedResult(GACA, SMALL, "criticality permuted", 88.54),
        PublishedResult(GACA, SMALL, "alpha = 0.25", 95.12),
        PublishedResult(GACA, SMALL, "alpha = 0.5", 96.88),
        PublishedResult(GACA, SMALL, "alpha = 1", 95.44),
        PublishedResult(GACA, LARGE, "GACA", 98.18),
        PublishedResult(GIGPO, SMALL, "GiGPO", 86.7),
        PublishedResult(GIGPO, SMALL, "GRPO", 72.8),
        PublishedResult(GIGPO, LARGE, "GiGPO", 90.8),
        PublishedResult(GIGPO, LARGE, "GRPO", 77.6),
    ),
    setup="prompt 2048 / response 512 / mean_std_norm",
    generated_data="ALFWorld games generated offline from the alfworld wheel's assets",
    generated_runs="generated ALFWorld games",
    score="success",
)
