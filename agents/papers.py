"""The papers whose published numbers the environments' benchmarks carry (:attr:`agents.base.Benchmark.results`,
``agents/<env>/benchmark.py``) and the models they report on."""

GACA = "GACA paper (arXiv 2609.12424)"
GIGPO = "GiGPO paper"
QWEN_1_5B = "Qwen2.5-1.5B-Instruct"
QWEN_7B = "Qwen2.5-7B-Instruct"
