"""AgentExecutor on the toy env with a scripted fake engine (no vLLM): per-step records, exact log-probs, the
step history in the prompt, verl-agent's invalid-action handling, failures.

vLLM is replaced by ``FakeEngine`` (a scripted ``generate`` with known per-token log-probs) so the executor's own
logic is checked with exact values in milliseconds; the real engine runs in the slow e2e tests.
"""
import asyncio
from types import SimpleNamespace

import pytest

from agents.prompts import PromptTemplate
from agents.registry import ENVIRONMENTS
from gaca_openrlhf.rollout.agent_executor import AgentExecutor
from gaca_openrlhf.rollout.config import RolloutConfig
from agents.toy.env import ToyCorridorEnv


class FakeTokenizer:
    """One id per character (ASCII), so a prompt's ids decode back to its text."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "<user>" + messages[0]["content"] + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def decode(ids):
    return "".join(map(chr, ids))


class FakeEngine:
    """Answers each call with the next scripted text; one token per character, with log-prob
    -(0.1 + 0.01 * position) for the token at that position (distinct, negative values)."""

    def __init__(self, texts, finish="stop"):
        self.texts, self.finish, self.calls = list(texts), finish, []

    @staticmethod
    def logprob(i):
        return -(0.1 + 0.01 * i)

    async def generate(self, prompt_ids, params):
        self.calls.append((list(prompt_ids), params))
        text = self.texts.pop(0) if self.texts else "<think>x</think><action>go forward</action>"
        ids = [ord(c) for c in text][: params.max_tokens]
        # each position's dict also holds a decoy token: only the sampled token's entry may be read
        lps = [{t: SimpleNamespace(logprob=self.logprob(i)), -1: SimpleNamespace(logprob=-9.0)}
               for i, t in enumerate(ids)]
        finish = "length" if len(ids) < len(text) else self.finish
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, logprobs=lps, text=text[: len(ids)],
                                                        finish_reason=finish)])


def _params(max_tokens=64):
    return SimpleNamespace(max_tokens=max_tokens, logprobs=None, stop=None, include_stop_str_in_output=False)


def run(executor, engine, task="1", max_length=4096, max_tokens=64):
    return asyncio.run(executor.execute(task, "", _params(max_tokens), max_length, FakeTokenizer(), engine))


def test_episode_records_per_step():
    ex = AgentExecutor(RolloutConfig(name="toy", max_new_tokens=64, prompt_max_len=4000))
    engine = FakeEngine(["<think>a</think><action>look</action>", "<think>b</think><action>go forward</action>"])
    out = run(ex, engine, task="0")  # goal = room 1
    assert not out["failed"] and out["won"] and out["score"] == 1.0
    steps = out["steps"]
    assert [s["step_index"] for s in steps] == [0, 1]
    assert [s["valid"] for s in steps] == [True, True]
    assert [s["reward"] for s in steps] == [0.0, 10.0]
    assert steps[0]["anchor_id"] == steps[1]["anchor_id"]  # "look" keeps room 0: same anchor state
    assert all(p.logprobs == 1 for _, p in engine.calls)  # log-probs always requested
    assert [p.stop for _, p in engine.calls] == [["</action>"], ["</action>"]]
    assert [s["prompt_ids"] for s in steps] == [c[0] for c in engine.calls]


def test_rollout_logprobs_are_the_sampled_tokens_values():
    text = "<think>a</think><action>look</action>"
    ex = AgentExecutor(RolloutConfig(name="toy", max_steps=1))
    out = run(ex, FakeEngine([text]))
    step = out["steps"][0]
    assert step["response_ids"] == [ord(c) for c in text]
    assert step["logprobs"] == [FakeEngine.logprob(i) for i in range(len(text))]  # exact: sign, order, token


def test_missing_logprob_entries_read_as_zero():
    class NoLogprobs(FakeEngine):
        async def generate(self, prompt_ids, params):
            out = await super().generate(prompt_ids, params)
            out.outputs[0].logprobs = None
            return out

    out = run(AgentExecutor(RolloutConfig(name="toy", max_steps=1)), NoLogprobs(["<think>a</think><action>look</action>"]))
    assert out["steps"][0]["logprobs"] == [0.0] * len(out["steps"][0]["response_ids"])


def test_step_history_is_in_the_next_prompts():
    ex = AgentExecutor(RolloutConfig(name="toy", history_k=2, max_steps=3, kwargs={"length": 6, "max_steps": 6}))
    engine = FakeEngine(["<think>a</think><action>look</action>", "<think>b</think><action>go forward</action>",
                         "<think>c</think><action>Look</action>"])
    out = run(ex, engine, task="3")  # goal room 4: three steps, no win
    prompts = [decode(s["prompt_ids"]) for s in out["steps"]]
    assert "Prior to this step" not in prompts[0]
    assert ("taken 1 step(s). Below are the most recent 1 observations and the corresponding actions you took: "
            "[Observation 1: 'You are in room 0. The corridor has rooms 0 to 5.', Action 1: 'look']") in prompts[1]
    assert "You are now at step 2 and your current observation is: You are in room 0." in prompts[1]
    assert ("most recent 2 observations and the corresponding actions you took: "
            "[Observation 1: 'You are in room 0. The corridor has rooms 0 to 5.', Action 1: 'look']\n"
            "[Observation 2: 'You are in room 0. The corridor has rooms 0 to 5.', Action 2: 'go forward']") in prompts[2]
    assert "You are now at step 3 and your current observation is: You are in room 1." in prompts[2]


def test_history_k_zero_keeps_the_no_history_prompt():
    ex = AgentExecutor(RolloutConfig(name="toy", history_k=0, max_steps=2))
    out = run(ex, FakeEngine(["<think>a</think><action>look</action>"] * 2), task="3")
    assert [decode(s["prompt_ids"]).count("Prior to this step") for s in out["steps"]] == [0, 0]


def make_validity_env(**config) -> ToyCorridorEnv:
    """The toy corridor (whose ``step`` takes ``valid`` like the real adapters) under a template of this test."""
    return ToyCorridorEnv(**config)


@pytest.fixture
def toy_valid(monkeypatch):
    monkeypatch.setitem(ENVIRONMENTS, "toy_valid", (__name__, "make_validity_env", "VALIDITY_PROMPT"))
    return "toy_valid"


VALIDITY_PROMPT = PromptTemplate(first="O={observation} A=[{admissible_actions}]",
                                 later="H={history} O={observation}", tail_chars=10)


def test_invalid_response_executes_its_projected_action_by_default(toy_valid):
    """verl-agent: <action>go forward</action> without <think> still moves the agent (and wins), but is invalid."""
    ex = AgentExecutor(RolloutConfig(name=toy_valid))
    assert ex.config.invalid_action == "execute"
    out = run(ex, FakeEngine(["<action>Go Forward</action>"]), task="0")  # goal = room 1
    assert out["won"] and [s["valid"] for s in out["steps"]] == [False]
    assert out["steps"][0]["reward"] == 10.0


def test_noop_option_answers_invalid_responses_without_executing(toy_valid):
    ex = AgentExecutor(RolloutConfig(name=toy_valid, invalid_action="noop", max_steps=3))
    engine = FakeEngine(["<action>go forward</action>", "no tags at all, so Go Forward", "<think>x</think>"])
    out = run(ex, engine, task="0")
    assert not out["won"] and [s["valid"] for s in out["steps"]] == [False, False, False]
    assert [s["reward"] for s in out["steps"]] == [0.0, 0.0, 0.0]
    # the history holds the projected actions: the tag content, then the last 10 characters (template.tail_chars)
    third = decode(out["steps"][2]["prompt_ids"])
    assert third == ("<user>H=[Observation 1: 'You are in room 0. The corridor has rooms 0 to 3.', "
                     "Action 1: 'go forward']\n[Observation 2: 'Nothing happens.', Action 2: 'go forward'] "
                     "O=Nothing happens.<assistant>")


def test_untagged_response_executes_its_tail(toy_valid):
    """Without <action> tags the last tail_chars (10 here; ALFWorld 30, WebShop 20) lower-cased characters run."""
    out = run(AgentExecutor(RolloutConfig(name=toy_valid, max_steps=1)), FakeEngine(["I will now GO FORWARD"]),
              task="0")
    assert out["won"] and out["steps"][0]["valid"] is False
    miss = run(AgentExecutor(RolloutConfig(name=toy_valid, max_steps=1)), FakeEngine(["go forward, I think"]),
               task="0")  # its tail is "r, i think": not a command
    assert not miss["won"]


def test_invalid_action_mode_is_checked():
    with pytest.raises(ValueError, match="invalid_action"):
        RolloutConfig(invalid_action="skip")


def test_truncated_or_malformed_is_invalid_not_a_crash():
    ex = AgentExecutor(RolloutConfig(name="toy", max_new_tokens=8, prompt_max_len=4000, max_steps=2))
    out = run(ex, FakeEngine(["<think>long answer</think><action>look</action>", "no tags"]), max_tokens=8)
    assert not out["failed"]
    assert [s["valid"] for s in out["steps"]] == [False, False]
    assert out["steps"][0]["truncated"]


def test_prompt_limit_and_max_new_tokens_respected():
    ex = AgentExecutor(RolloutConfig(name="toy", max_new_tokens=16, prompt_max_len=50, max_steps=1))
    engine = FakeEngine([])
    out = run(ex, engine, max_length=60)
    prompt_ids, params = engine.calls[0]
    assert len(prompt_ids) == 50 and params.max_tokens == 10  # max_length - prompt
    assert len(out["steps"][0]["prompt_ids"]) == 50


def test_env_failure_marks_episode_failed():
    ex = AgentExecutor(RolloutConfig(name="toy", kwargs={"fail_on_task": 3}))
    out = run(ex, FakeEngine([]), task="3")
    assert out["failed"] and out["steps"] == [] and "injected failure" in out["error"]


def test_admissible_validity_marks_off_list_actions_invalid_but_still_runs_them(toy_valid):
    """validity="admissible" (ablation): a well-formed action off the list is invalid (penalised) and executed."""
    texts = ["<think>x</think><action>jump</action>", "<think>x</think><action>look</action>",
             "<think>x</think><action>go forward</action>"]
    fmt = run(AgentExecutor(RolloutConfig(name=toy_valid, max_steps=3)), FakeEngine(texts), task="0")
    assert [s["valid"] for s in fmt["steps"]] == [True, True, True]  # verl-agent: format only
    # whatever the rule, each step records whether its action was listed (the off-list share, issue 35)
    assert [s["listed"] for s in fmt["steps"]] == [False, True, True]
    adm = run(AgentExecutor(RolloutConfig(name=toy_valid, max_steps=3, validity="admissible")), FakeEngine(texts),
              task="0")
    assert [s["valid"] for s in adm["steps"]] == [False, True, True] and adm["won"]
    # a format-invalid response stays invalid whatever the list says
    bad = run(AgentExecutor(RolloutConfig(name=toy_valid, max_steps=1, validity="admissible")),
              FakeEngine(["<action>go forward</action>"]), task="0")
    assert [s["valid"] for s in bad["steps"]] == [False] and bad["won"]
    with pytest.raises(ValueError, match="validity"):
        RolloutConfig(validity="listed")


class UnlistedToyEnv(ToyCorridorEnv):
    """The toy corridor with no admissible list (as an environment that lists nothing)."""

    def _obs(self):
        out = super()._obs()
        out.admissible_actions = []
        return out


def make_unlisted_env(**config):
    return UnlistedToyEnv(**config)


def test_admissible_validity_judges_format_alone_where_nothing_is_listed(monkeypatch):
    monkeypatch.setitem(ENVIRONMENTS, "toy_unlisted", (__name__, "make_unlisted_env", "VALIDITY_PROMPT"))
    out = run(AgentExecutor(RolloutConfig(name="toy_unlisted", max_steps=1, validity="admissible")),
              FakeEngine(["<think>x</think><action>go forward</action>"]), task="0")
    assert out["won"] and [s["valid"] for s in out["steps"]] == [True]  # not "off an empty list"
    assert [s["listed"] for s in out["steps"]] == [None]  # unknown, not counted as off the list


def test_step_records_carry_oracle_progress():
    """With the oracle on, each step's progress is the drop of the env's distance to the goal across it (the credit
    audit's input); without it, NaN. Catches: progress from the wrong pair of observations, its sign flipped."""
    import math

    act = lambda a: f"<think>x</think><action>{a}</action>"  # noqa: E731
    script = [act("go forward"), act("look"), act("go back"), act("go forward"), act("go forward"), act("go forward")]
    ex = AgentExecutor(RolloutConfig(name="toy", kwargs={"oracle": True}, max_new_tokens=64, prompt_max_len=4000))
    out = run(ex, FakeEngine(script), task="2")  # goal room 3 from room 0: distance 3
    assert out["won"]
    assert [s["progress"] for s in out["steps"]] == [1.0, 0.0, -1.0, 1.0, 1.0, 1.0]
    # the default (credit_audit "auto") asks an environment with an oracle for it; "off" does not
    auto = run(AgentExecutor(RolloutConfig(name="toy", max_new_tokens=64, prompt_max_len=4000)),
               FakeEngine(script[:1]), task="0")
    assert [s["progress"] for s in auto["steps"]] == [1.0]
    off = run(AgentExecutor(RolloutConfig(name="toy", credit_audit="off", max_new_tokens=64, prompt_max_len=4000)),
              FakeEngine(script[:1]), task="0")
    assert all(math.isnan(s["progress"]) for s in off["steps"])


def test_validation_rounds_replay_the_same_seeds():
    """Requests marked as validation round r (SamplingParams.extra_args) count their episodes from 0 within the round
    and derive seeds without r: rounds 1 and 2 sample with the same seeds, which differ from training's. Catches:
    the round in the seed, the count carried across rounds, validation sharing training's counter."""
    from gaca_openrlhf.rollout.config import VALIDATION_ROUND_KEY

    def seeds(ex, round_index=None, episodes=2):
        out = []
        for _ in range(episodes):
            params = _params()
            params.extra_args = None if round_index is None else {VALIDATION_ROUND_KEY: round_index}
            engine = FakeEngine([])
            asyncio.run(ex.execute("0", "", params, 4096, FakeTokenizer(), engine))
            out.append(engine.calls[0][1].seed)
        return out

    ex = AgentExecutor(RolloutConfig(name="toy", max_new_tokens=64, prompt_max_len=4000))
    train = seeds(ex)
    first, second = seeds(ex, round_index=1), seeds(ex, round_index=2)
    assert first == second and len(set(first)) == 2
    assert not set(first) & set(train)
    assert seeds(ex) != train  # training's own count goes on (its next episodes get new seeds)


def test_validation_seeds_do_not_depend_on_where_the_games_live():
    """A validation panel lists games by absolute path (the quickstart's lie under $GACA_CACHE): the same game under
    two data folders gets the same episode seeds (``traj_uid``), a different game other ones. Catches the path in the
    seed (the same model then scores differently when the cache moves)."""
    from gaca_openrlhf.rollout.config import VALIDATION_ROUND_KEY

    def uid(task):
        ex = AgentExecutor(RolloutConfig(name="toy", max_new_tokens=64, prompt_max_len=4000))
        params = _params()
        params.extra_args = {VALIDATION_ROUND_KEY: 1}
        return asyncio.run(ex.execute(task, "", params, 4096, FakeTokenizer(), FakeEngine([])))["traj_uid"]

    game = "json_2.1.1/valid_seen/pick_and_place_simple-Bowl-None-Shelf-304/trial_G0_000089_00"
    assert uid("/home/a/.cache/" + game) == uid("/tmp/elsewhere/" + game)
    assert uid("/home/a/.cache/" + game) != uid("/home/a/.cache/" + game.replace("000089", "000090"))
