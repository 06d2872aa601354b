"""``VLLMGenerator``'s ``sampling_extra`` hook: extra ``SamplingParams`` fields a subclass sets (the diagnostics'
scoring generator asks vLLM for log-probs this way) must reach every request's real ``vllm.SamplingParams``. The vLLM
engine itself cannot start in a unit test, so ``vllm.LLM`` is replaced by a recorder (the real engine runs in the
slow end-to-end eval test); the sampling parameters are vLLM's own class. Each test names the change it catches."""
from __future__ import annotations

import vllm

from gaca_openrlhf.eval.runner import GenRequest


class _RecorderLLM:
    def __init__(self, **kw):
        self.params = []

    def generate(self, prompts, params, use_tqdm=False):
        from types import SimpleNamespace

        self.params.extend(params)
        return [SimpleNamespace(outputs=[SimpleNamespace(text="<action>look</action>", token_ids=[3],
                                                         finish_reason="stop")]) for _ in prompts]


def test_sampling_extra_reaches_every_requests_params(monkeypatch):
    """Catches `SamplingParams(..., **self.sampling_extra)` -> the `**self.sampling_extra` dropped (a subclass's
    extra fields, e.g. `logprobs=1` for the response NLL, silently ignored)."""
    from gaca_openrlhf.eval.vllm_generator import VLLMGenerator

    monkeypatch.setattr(vllm, "LLM", _RecorderLLM)
    g = VLLMGenerator("/m", temperature=0.4, max_model_len=64)
    assert g._params(GenRequest([1], 3, 5)).logprobs is None  # vLLM's default when nothing extra is asked
    g.sampling_extra = {"logprobs": 1}
    g.generate([GenRequest([1, 2], 4, 7), GenRequest([3], 2, 8)])
    assert [(p.logprobs, p.seed) for p in g.llm.params] == [(1, 7), (1, 8)]
    assert isinstance(g.llm.params[0], vllm.SamplingParams)


def test_cpu_engine_runs_in_process_unless_the_caller_says_otherwise(monkeypatch):
    """Catches: the in-process engine setting dropped (each evaluation spawns an EngineCore and a Worker process:
    ~15 s more start-up on 2 cores) or overriding a caller's own VLLM_ENABLE_V1_MULTIPROCESSING."""
    from gaca_openrlhf.eval import vllm_generator
    from gaca_openrlhf.eval.vllm_generator import VLLMGenerator

    monkeypatch.setattr(vllm, "LLM", _RecorderLLM)
    monkeypatch.setattr(vllm_generator, "cuda_available", lambda: False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    g = VLLMGenerator("/m", temperature=0.4, max_model_len=64)
    assert g.settings["engine_in_process"] is True
    import os

    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    assert VLLMGenerator("/m", temperature=0.4, max_model_len=64).settings["engine_in_process"] is False
