"""WebShop as the papers' benchmark: their published success rates (the project's FACTS.md "Reference numbers"),
its part of their training setup, and how the comparison report names the generated WebShop catalog."""
from agents.base import Benchmark, PublishedResult
from agents.papers import GACA, GIGPO, QWEN_1_5B as SMALL, QWEN_7B as LARGE

BENCHMARK = Benchmark(
    results=(
        PublishedResult(GACA, SMALL, "GACA", 80.99),
        PublishedResult(GACA, LARGE, "GACA", 83.59),
        PublishedResult(GIGPO, SMALL, "GiGPO", 67.4),
        PublishedResult(GIGPO, SMALL, "GRPO", 56.8),
        PublishedResult(GIGPO, LARGE, "GiGPO", 75.2),
        PublishedResult(GIGPO, LARGE, "GRPO", 66.1),
    ),
    setup="prompt 4096 / mean_norm",
    generated_data="the generated WebShop catalog",
    generated_runs="the generated WebShop catalog",
    score="score",
)
