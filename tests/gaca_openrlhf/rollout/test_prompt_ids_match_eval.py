"""Training rollout and evaluation feed the policy the same prompt ids for the same episode.

One episode of the toy corridor (scripted responses, one invalid but executed as verl-agent does) runs through the
training ``AgentExecutor`` and through the eval runner ``run_episodes`` with the eval CLI's encoder
(``runner.tokenizer_encoder``); both must produce identical prompt-id sequences, step by step. The tokenizer is a
real Hugging Face fast tokenizer (byte-level BPE trained here in milliseconds) with a Qwen-style chat template,
so the chat template and the generation prompt are really applied. vLLM is replaced by scripted generators.
"""
import asyncio
from types import SimpleNamespace

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from gaca_openrlhf.eval.runner import GenResult, RunConfig, run_episodes, tokenizer_encoder
from gaca_openrlhf.rollout.agent_executor import AgentExecutor
from gaca_openrlhf.rollout.config import RolloutConfig

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# toy task "1": goal room 2. look (stays), an untagged-think response that still moves (executed), then the win
RESPONSES = ["<think>a</think><action>look</action>", "<action>go forward</action>",
             "<think>c</think><action>go forward</action>"]


@pytest.fixture(scope="module")
def tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["You are in room 0. The corridor has rooms 0 to 3.", "go forward", "look"] + RESPONSES,
                            trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>")
    hf.chat_template = CHAT_TEMPLATE
    return hf


class Engine:
    """The executor's vLLM stand-in: the i-th call answers RESPONSES[i]."""

    def __init__(self, tokenizer):
        self.tok, self.prompts = tokenizer, []

    async def generate(self, prompt_ids, params):
        text = RESPONSES[len(self.prompts)]
        self.prompts.append(list(prompt_ids))
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop",
                                                        logprobs=[{t: SimpleNamespace(logprob=-1.0)} for t in ids])])


class Generator:
    """The eval runner's generator stand-in (one episode: the i-th call answers RESPONSES[i])."""

    def __init__(self, tokenizer):
        self.tok, self.prompts = tokenizer, []

    def generate(self, requests):
        assert len(requests) == 1
        text = RESPONSES[len(self.prompts)]
        self.prompts.append(list(requests[0].prompt_ids))
        return [GenResult(text, self.tok(text, add_special_tokens=False)["input_ids"], "stop")]


def test_training_and_eval_render_identical_prompt_ids(tokenizer):
    engine = Engine(tokenizer)
    params = SimpleNamespace(max_tokens=64, logprobs=None, stop=None, include_stop_str_in_output=False)
    ex = AgentExecutor(RolloutConfig(name="toy", history_k=2, prompt_max_len=4096, max_new_tokens=64))
    out = asyncio.run(ex.execute("1", "", params, 8192, tokenizer, engine))
    assert out["won"] and [s["valid"] for s in out["steps"]] == [True, False, True]

    gen = Generator(tokenizer)
    records, _ = run_episodes(["1"], RunConfig(env="toy", history_k=2, prompt_max_len=4096, max_new_tokens=64,
                                               record_actions=True),
                              gen, tokenizer_encoder(tokenizer), progress=False)
    assert records[0]["won"] and [a["valid"] for a in records[0]["actions"]] == [True, False, True]

    assert len(engine.prompts) == len(gen.prompts) == 3
    assert engine.prompts == gen.prompts  # the same ids, step by step
    assert [s["prompt_ids"] for s in out["steps"]] == gen.prompts
    # and they are the chat-templated prompt with the generation prompt, history from the second step on
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    for ids in gen.prompts:
        text = tokenizer.decode(ids)
        assert ids[0] == start and text.startswith("<|im_start|>user\nYou are an expert agent walking")
        assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    third = tokenizer.decode(gen.prompts[2])
    assert "[Observation 2: 'You are in room 0. The corridor has rooms 0 to 3.', Action 2: 'go forward']" in third


@pytest.mark.parametrize("mode, won", [("execute", True), ("noop", False)])
def test_eval_runner_handles_invalid_responses_as_training_does(tokenizer, mode, won):
    """Default: the invalid step-2 response moves the agent (verl-agent); with "noop" it does not, in both loops."""
    engine = Engine(tokenizer)
    params = SimpleNamespace(max_tokens=64, logprobs=None, stop=None, include_stop_str_in_output=False)
    # the episode settings both configs share by name; the environment is RolloutConfig.name (--env.name) and
    # RunConfig.env (the eval CLI's --env)
    cfg = dict(history_k=2, prompt_max_len=4096, max_new_tokens=64, max_steps=3)
    if mode != "execute":
        cfg["invalid_action"] = mode
    ex = AgentExecutor(RolloutConfig(name="toy", **cfg))
    out = asyncio.run(ex.execute("1", "", params, 8192, tokenizer, engine))
    gen = Generator(tokenizer)
    records, _ = run_episodes(["1"], RunConfig(env="toy", **cfg), gen, tokenizer_encoder(tokenizer), progress=False)
    assert out["won"] is records[0]["won"] is won
    assert engine.prompts == gen.prompts
    second = tokenizer.decode(gen.prompts[2])
    assert ("Nothing happens." in second) is (not won)
