"""Learning benchmarks on the CPU backend: the quickstart (SFT warm start -> held-out eval -> GACA RL -> eval ->
report) and the GRPO / GiGPO / GACA comparison from the same warm start (:mod:`.quickstart`)."""
