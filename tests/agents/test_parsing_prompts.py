"""verl-agent's action projection and step-prompt rules (agents.parsing, agents.prompts), the library side.

Reference: tests/data/reference/verl_agent_prompt_vectors.json (prompts and projections rendered by verl-agent's
own templates and rules); the rule tests below pin each rule separately so that a change to one is named.
"""
import json
import os
from pathlib import Path

import pytest

from agents.alfworld.env import PROMPT as ALFWORLD
from agents.parsing import judge_response, parse_action, tail_chars_of
from agents.prompt_cases import render_case
from agents.prompts import PromptTemplate, StepMemory, render_history, render_prompt, render_step_prompt
from agents.webshop.env import PROMPT as WEBSHOP

ROOT = Path(__file__).resolve().parents[2]
VECTORS = Path(os.environ.get("GACA_REFERENCE_DIR", ROOT / "tests" / "data" / "reference")) / \
    "verl_agent_prompt_vectors.json"
CASES = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]


# ------------------------------------------------------------------------------------------- reference vectors
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_reference_case(case):
    out = render_case(case)
    if "response" in case:
        assert (out["action"], out["valid"]) == (case["expected_action"], case["expected_valid"])
    else:
        assert out["prompt"] == case["expected_prompt"]


def test_reference_covers_both_envs_and_both_templates():
    envs = {(c["env"], "response" in c) for c in CASES}
    assert envs == {("alfworld", True), ("alfworld", False), ("webshop", True), ("webshop", False)}
    firsts = [c for c in CASES if "expected_prompt" in c and (c["step_count"] == 0 or c["history_length"] == 0)]
    assert {c["env"] for c in firsts} == {"alfworld", "webshop"}


# ------------------------------------------------------------------------------------------------- projection
def test_action_between_first_tags_lowercased_and_stripped_inner_spaces_kept():
    p = parse_action("<think>go look</think>\n<action>  Go to   Cabinet 1 </action>")
    assert p.valid and p.action == "go to   cabinet 1"


def test_first_action_block_wins():
    p = parse_action("<think>x</think><action>open drawer 1</action> hmm <action>look</action>")
    assert p.valid and p.action == "open drawer 1"


def test_tags_found_case_insensitively_but_think_must_be_lowercase():
    p = parse_action("<think>x</think><ACTION>Look</ACTION>")
    assert p.valid and p.action == "look"
    q = parse_action("<THINK>x</THINK><action>look</action>")
    assert not q.valid and q.action == "look"


def test_missing_think_or_cjk_keeps_the_action_but_is_invalid():
    p = parse_action("<action>go to sofa 1</action>")
    assert not p.valid and p.action == "go to sofa 1"
    assert not parse_action("<think>x<action>look</action>").valid  # no </think>
    cjk = parse_action("<think>我想</think><action>look</action>")
    assert not cjk.valid and cjk.action == "look" and cjk.reason == "cjk characters"
    # only the CJK Unified Ideographs block counts (verl-agent's [\u4e00-\u9fff]): kana and hangul do not
    assert parse_action("<think>ひらがな 한국어</think><action>look</action>").valid
    assert not parse_action("<think>\u4e00</think><action>look</action>").valid
    assert not parse_action("<think>\u9fff</think><action>look</action>").valid
    assert parse_action("<think>\u4dff\ua000</think><action>a</action>").valid  # just outside the block


def test_without_both_action_tags_the_tail_is_the_action():
    text = "<think>ok</think> I Will Go To The Sofa Number One Now"
    a = parse_action(text, 30)
    assert not a.valid and a.action == text.lower()[-30:] and len(a.action) == 30
    w = parse_action(text, 20)
    assert not w.valid and w.action == text.lower()[-20:]
    short = parse_action("<action>look", 30)  # no </action>: the whole (short) text
    assert not short.valid and short.action == "<action>look"
    assert parse_action("", 30) == parse_action("", 30) and parse_action("", 30).action == ""
    assert not parse_action("", 30).valid


def test_empty_or_reversed_block_is_an_empty_valid_action():
    empty = parse_action("<think>x</think><action> </action>")
    assert empty.valid and empty.action == ""
    rev = parse_action("<think>x</think></action>look<action>")
    assert rev.valid and rev.action == ""


def test_tail_length_per_environment():
    assert tail_chars_of("alfworld") == ALFWORLD.tail_chars == 30
    assert tail_chars_of("webshop") == WEBSHOP.tail_chars == 20
    with pytest.raises(TypeError):
        parse_action(None)
    with pytest.raises(ValueError):
        parse_action("x", 0)


def test_judge_response_marks_truncated_and_empty_responses_invalid():
    ok = "<think>x</think><action>look</action>"
    assert judge_response(ok, "stop", 9).valid
    cut = judge_response(ok, "length", 9)
    assert not cut.valid and cut.action == "look" and "truncated" in cut.reason
    assert not judge_response("", "stop", 0).valid
    untagged = "<think>x</think> click the buy now button please"
    assert judge_response(untagged, "stop", 9, tail_chars=20).action == untagged[-20:]


# ----------------------------------------------------------------------------------------------------- memory
def test_memory_keeps_last_k_pairs_with_step_numbers():
    m = StepMemory(k=2)
    for i in range(3):
        m.add(f"obs{i}", f"act{i}")
    text = m.render()
    assert text == "[Observation 2: 'obs1', Action 2: 'act1']\n[Observation 3: 'obs2', Action 3: 'act2']"
    assert m.steps_taken == 3
    m0 = StepMemory(k=0)
    m0.add("o", "a")
    assert m0.pairs == [] and m0.steps_taken == 1


def test_render_history_numbers_from_the_step_count():
    assert render_history([("o", "a")], 7) == "[Observation 7: 'o', Action 7: 'a']"
    assert render_history([], 3) == ""


# ---------------------------------------------------------------------------------------------------- prompts
T = PromptTemplate(first="F T={task} O={observation} A=[{admissible_actions}]",
                   later="L T={task} n={step_count} k={history_length} H={history} O={observation} s={current_step}")


def test_first_step_and_history_zero_use_the_no_history_template():
    m = StepMemory(k=2)
    assert render_step_prompt(T, "task", m, "o0", ["look", "go to x"]) == "F T=task O=o0 A=['look', 'go to x']"
    m.add("o0", "look")
    assert render_step_prompt(T, "task", m, "o1", []) == "L T=task n=1 k=1 H=[Observation 1: 'o0', Action 1: 'look'] O=o1 s=2"
    m0 = StepMemory(k=0)
    for i in range(3):
        m0.add(f"o{i}", "look")
    assert render_step_prompt(T, "task", m0, "o3", ["look"]) == "F T=task O=o3 A=['look']"
    assert render_prompt(T, "task", "o3", ["look"], [("o2", "look")], 3, -1) == "F T=task O=o3 A=['look']"


def test_history_window_and_counts():
    hist = [(f"o{i}", f"a{i}") for i in range(5)]
    text = render_prompt(T, "t", "o5", [], hist, 5, 3)
    assert text.startswith("L T=t n=5 k=3 H=[Observation 3: 'o2', Action 3: 'a2']\n[Observation 4:")
    assert text.endswith("[Observation 5: 'o4', Action 5: 'a4'] O=o5 s=6")
    assert "o1" not in text
    # a k larger than the episode so far shows every pair and says how many
    assert " k=2 " in render_prompt(T, "t", "o2", [], hist[:2], 2, 5)
    with pytest.raises(ValueError):
        render_prompt(T, "t", "o", [], hist, 2, 2)  # more pairs than steps taken


def test_alfworld_actions_one_per_line_without_help():
    text = render_prompt(ALFWORLD, "put a cd in garbagecan.", "obs", ["look", "help", "go to desk 1"], [], 0, 2)
    assert "are: ['look'\n 'go to desk 1'].\n" in text and "help" not in text
    assert text.startswith("\nYou are an expert agent operating in the ALFRED Embodied Environment.\nYour current")
    assert "Your task is to" not in text  # verl-agent's no-history ALFWorld template has no task line
    later = render_prompt(ALFWORLD, "put a cd in garbagecan.", "obs b", ["look"], [("obs a", "look")], 1, 2)
    assert "Environment. Your task is to: put a cd in garbagecan.\nPrior to this step" in later
    assert "most recent 1 observations and the corresponding actions you took: " \
           "[Observation 1: 'obs a', Action 1: 'look']\nYou are now at step 2" in later


def test_webshop_actions_format_and_trailing_spaces():
    text = render_prompt(WEBSHOP, "buy tea", "'Search'", ["search[<your query>]", "click[search]"], [], 0, 2)
    assert "are: \n[\n'search[<your query>]',\n'click[search]',\n].\n\n" in text
    assert "e\u2011commerce environment. \nYour task is to: buy tea.\n" in text
    later = render_prompt(WEBSHOP, "buy tea", "'x'", ["click[a]"], [("'Search'", "search[tea]")], 1, 2)
    assert "e\u2011commerce environment.\nYour task is to: buy tea.\n" in later
    assert "are: \n[\n'click[a]',\n]" in later and "</think> tags. \nOnce" in later


def test_webshop_drops_history_when_the_prompt_exceeds_13000_characters():
    assert WEBSHOP.max_chars_with_history == 13000
    hist = [("'x'" * 1000, "click[a]"), ("'y'" * 1000, "click[b]")]
    small = render_prompt(WEBSHOP, "t", "obs", ["click[a]"], hist, 2, 2)
    assert "Prior to this step" in small and len(small) <= 13000
    big_hist = [("'x'" * 2200, "click[a]"), ("'y'" * 2200, "click[b]")]
    big = render_prompt(WEBSHOP, "t", "obs", ["click[a]"], big_hist, 2, 2)
    assert "Prior to this step" not in big and big == render_prompt(WEBSHOP, "t", "obs", ["click[a]"], [], 0, 2)
    # ALFWorld has no such limit
    assert "Prior to this step" in render_prompt(ALFWORLD, "t", "obs", ["look"], big_hist, 2, 2)


def test_webshop_case_formats_raw_server_text():
    case = {"env": "webshop", "task": "buy tea", "history_length": 2, "step_count": 1,
            "observation": "Instruction: [SEP] buy tea [SEP] Back to Search [SEP] B01",
            "admissible_actions": {"has_search_bar": False, "clickables": ["back to search", "b01"]},
            "history": [{"observation": "WebShop [SEP] Instruction: [SEP] buy tea [SEP] Search",
                         "action": "search[tea]"}]}
    prompt = render_case(case)["prompt"]
    assert "[Observation 1: ''Search'', Action 1: 'search[tea]']" in prompt
    assert "current observation is: 'Back to Search' [SEP] 'B01'.\n" in prompt
    assert "[\n'click[back to search]',\n'click[b01]',\n]" in prompt


def test_fit_prompt_keeps_the_most_recent_tokens():
    from agents.prompts import fit_prompt

    logged = []
    assert fit_prompt([1, 2, 3], 3, log=logged.append) == [1, 2, 3] and not logged
    assert fit_prompt([1, 2, 3, 4, 5], 2, log=logged.append) == [4, 5] and len(logged) == 1
