"""Lock-step evaluation loop: all live episodes of a panel advance one step per ``generate`` call.

The loop is independent of vLLM (any :class:`Generator` works; tests use a scripted one) and uses exactly the
training rollout's pieces (:mod:`gaca_openrlhf.rollout.agent_executor`): the environment registry
(``agents.registry.make_env``/``prompt_template``), the step prompt with k pairs of memory
(``agents.prompts.StepMemory``/``render_step_prompt``), the chat-template encoding (``agents.prompts.encode_step_prompt``,
see :func:`tokenizer_encoder`), left-truncation of long prompts, ``stop=["</action>"]``,
``agents.parsing.judge_response`` (verl-agent's projection; a truncated or empty response is an invalid action) and
``agents.base.step_env`` (by default the projected action is executed even when invalid, as verl-agent does;
``RunConfig.invalid_action="noop"`` answers it as an unknown command instead).

Scheduling: ``num_envs`` environment slots; episodes (task-major: task 0 episodes 0..K-1, task 1, ...) fill free
slots in order, so which episodes share a ``generate`` call depends only on the panel and the settings, never on
timing. Each step's request carries its own seed, derived from (seed, task, episode, step): the sampled tokens do
not depend on the batch either (up to the backend's batch invariance).

An environment failure (exception or timeout in reset/step) ends *that* episode as failed (``failed=True``, the
error text kept); it counts as not solved and is reported, and the slot gets a fresh environment.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import math
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from agents.base import is_listed, step_env, takes_validity
from agents.parsing import judge_response
from agents.prompts import StepMemory, encode_step_prompt, fit_prompt, render_step_prompt
from agents.registry import make_env, prompt_template
from gaca_openrlhf.seeding import derive_seed, eval_episode_seed  # noqa: F401  (re-exported: callers import them here)

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------- generation
@dataclass(frozen=True)
class GenRequest:
    prompt_ids: list[int]
    max_tokens: int
    seed: int


@dataclass(frozen=True)
class GenResult:
    text: str
    token_ids: list[int]
    finish_reason: str | None = "stop"


class Generator(Protocol):
    """Samples one response per request (temperature, top_p and stop strings are the generator's own)."""

    def generate(self, requests: Sequence[GenRequest]) -> list[GenResult]:
        ...


# ----------------------------------------------------------------------------------------------- config
@dataclass
class RunConfig:
    env: str
    env_kwargs: dict = field(default_factory=dict)
    episodes_per_task: int = 1
    seed: int = 0
    history_k: int = 2
    max_steps: int = 0  # 0: the environment's own limit (ALFWorld 50, WebShop 15)
    max_new_tokens: int = 512
    prompt_max_len: int = 2048
    max_model_len: int = 0  # 0: prompt_max_len + max_new_tokens
    num_envs: int = 16
    env_timeout_s: float = 120.0
    record_actions: bool = False
    # keep, per step, the anchor it acted on, its reward and validity, and the env's "oracle_*" info after it
    # (the credit audit's input, docs/credit_audit.md); the episode record gets "step_records" and "first_oracle"
    record_steps: bool = False
    invalid_action: str = "execute"  # as RolloutConfig.invalid_action: "execute" (verl-agent) | "noop"

    def __post_init__(self) -> None:
        if self.episodes_per_task < 1:
            raise ValueError(f"episodes_per_task must be >= 1, got {self.episodes_per_task}")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if self.max_new_tokens < 1 or self.prompt_max_len < 1:
            raise ValueError("max_new_tokens and prompt_max_len must be >= 1")
        if not self.max_model_len:
            self.max_model_len = self.prompt_max_len + self.max_new_tokens
        if self.invalid_action not in ("execute", "noop"):
            raise ValueError(f"invalid_action must be 'execute' or 'noop', got {self.invalid_action!r}")


# ----------------------------------------------------------------------------------------------- episodes
@dataclass
class _Episode:
    index: int
    task: str
    task_index: int
    episode: int
    seed: int
    task_text: str = ""
    obs: Any = None
    first_info: dict = field(default_factory=dict)
    memory: StepMemory | None = None
    steps: int = 0
    valid_steps: int = 0
    repeat_steps: int = 0  # steps whose action repeats the previous step's (an agent stuck in a loop)
    listed_steps: int = 0  # steps taken where the environment listed its admissible actions
    admissible_steps: int = 0  # ... and the action was one of them
    truncated_responses: int = 0
    response_tokens: int = 0
    actions: list = field(default_factory=list)
    step_records: list = field(default_factory=list)
    last_action: str = ""
    done: bool = False
    failed: bool = False
    error: str = ""


class _Slot:
    def __init__(self) -> None:
        self.env = None
        self.takes_validity = False
        self.episode: _Episode | None = None


def tokenizer_encoder(tokenizer) -> Callable[[str], list[int]]:
    """The ``encode`` argument of :func:`run_episodes` for a Hugging Face tokenizer: the training rollout's
    encoding (:func:`agents.prompts.encode_step_prompt`), so evaluation feeds the policy the same prompt ids."""
    return functools.partial(encode_step_prompt, tokenizer)


def _close_quietly(env) -> None:
    if env is None:
        return

    def close():
        try:
            env.close()
        except Exception as e:  # a dead env must not stop the evaluation
            logger.warning(f"[eval] env close failed: {e!r}")

    threading.Thread(target=close, daemon=True).start()


def run_episodes(tasks: Sequence[str], cfg: RunConfig, generator: Generator, encode: Callable[[str], list[int]],
                 task_types: dict | None = None, progress: bool = True, desc: str = "eval") -> tuple[list[dict], dict]:
    """Run ``cfg.episodes_per_task`` episodes of every task; returns (episode records in panel order, timing)."""
    template = prompt_template(cfg.env)
    task_types = task_types or {}
    specs = [(ti, str(task), k) for ti, task in enumerate(tasks) for k in range(cfg.episodes_per_task)]
    pending = deque(_Episode(index=i, task=task, task_index=ti, episode=k, seed=eval_episode_seed(cfg.seed, task, k))
                    for i, (ti, task, k) in enumerate(specs))
    records: list[dict | None] = [None] * len(specs)
    slots = [_Slot() for _ in range(min(cfg.num_envs, max(1, len(specs))))]
    # twice the slots: a worker thread stuck in a timed-out call must not starve the others
    pool = cf.ThreadPoolExecutor(max_workers=2 * len(slots), thread_name_prefix="eval-env")
    timing = {"generation_s": 0.0, "environment_s": 0.0, "generate_calls": 0, "max_batch": 0}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(specs), desc=desc, file=sys.stderr, dynamic_ncols=True, unit="ep")
    wins = 0

    def finish(slot: _Slot) -> None:
        nonlocal wins
        ep = slot.episode
        slot.episode = None
        records[ep.index] = _record(ep, task_types, cfg)
        wins += int(records[ep.index]["won"])
        if ep.failed:  # a broken env is not reused
            _close_quietly(slot.env)
            slot.env = None
        if bar is not None:
            done = sum(r is not None for r in records)
            bar.set_postfix(success=f"{wins / max(done, 1):.3f}", failed=sum(bool(r and r["failed"]) for r in records))
            bar.update(1)

    def fail(slot: _Slot, what: str, err: BaseException | str) -> None:
        ep = slot.episode
        ep.failed, ep.done = True, True
        ep.error = f"{what}: {err!r}" if isinstance(err, BaseException) else f"{what}: {err}"
        logger.warning(f"[eval] episode {ep.index} (task {ep.task!r}, episode {ep.episode}) failed: {ep.error}")
        finish(slot)

    def do_reset(slot: _Slot, task: str):
        if slot.env is None:
            slot.env = make_env(cfg.env, **cfg.env_kwargs)
            slot.takes_validity = takes_validity(slot.env)
        return slot.env.reset(task)

    def do_step(slot: _Slot, action: str, valid: bool):
        return step_env(slot.env, action, valid, cfg.invalid_action, slot.takes_validity)

    def gather(calls):
        """Run (slot, fn, args) in parallel; returns [(slot, result | None, error | None)] in input order."""
        t0 = time.time()
        futures = [(slot, pool.submit(fn, *args)) for slot, fn, args in calls]
        deadline = time.time() + cfg.env_timeout_s
        out = []
        for slot, fut in futures:
            try:
                out.append((slot, fut.result(timeout=max(0.0, deadline - time.time())), None))
            except cf.TimeoutError:
                out.append((slot, None, f"timed out after {cfg.env_timeout_s:.0f}s"))
            except Exception as e:  # any env fault fails only this episode
                out.append((slot, None, e))
        timing["environment_s"] += time.time() - t0
        return out

    try:
        while pending or any(s.episode is not None for s in slots):
            # 1. free slots take the next episodes (in panel order) and reset them together
            starting = []
            for slot in slots:
                if slot.episode is None and pending:
                    slot.episode = pending.popleft()
                    starting.append(slot)
            for slot, res, err in gather([(s, do_reset, (s, s.episode.task)) for s in starting]):
                if err is not None:
                    fail(slot, "reset", err)
                    continue
                ep = slot.episode
                ep.task_text, ep.obs = res
                ep.first_info = dict(getattr(ep.obs, "info", {}) or {})
                ep.memory = StepMemory(k=cfg.history_k)
                if ep.obs.done:  # nothing to do (should not happen)
                    ep.done = True
                    finish(slot)
            live = [s for s in slots if s.episode is not None]
            if not live:
                continue
            # 2. one generate call over every live episode
            requests, parsed_prompts = [], []
            for slot in live:
                ep = slot.episode
                text = render_step_prompt(template, ep.task_text, ep.memory, ep.obs.observation,
                                          ep.obs.admissible_actions)
                ids = fit_prompt(list(encode(text)), cfg.prompt_max_len, log=lambda m: logger.warning(f"[eval] {m}"))
                max_tokens = max(1, min(cfg.max_new_tokens, cfg.max_model_len - len(ids)))
                requests.append(GenRequest(ids, max_tokens, derive_seed(ep.seed, ep.steps)))
                parsed_prompts.append(ids)
            t0 = time.time()
            outputs = generator.generate(requests)
            timing["generation_s"] += time.time() - t0
            timing["generate_calls"] += 1
            timing["max_batch"] = max(timing["max_batch"], len(requests))
            if len(outputs) != len(requests):
                raise RuntimeError(f"generator returned {len(outputs)} outputs for {len(requests)} requests")
            # 3. parse and step every live environment together
            calls, actions = [], []
            for slot, out in zip(live, outputs):
                ep = slot.episode
                parsed = judge_response(out.text, out.finish_reason, len(out.token_ids), template.tail_chars)
                truncated = out.finish_reason == "length"
                valid = parsed.valid
                ep.response_tokens += len(out.token_ids)
                ep.truncated_responses += int(truncated)
                actions.append((parsed.action, valid))
                calls.append((slot, do_step, (slot, parsed.action, valid)))
            for (slot, res, err), (action, valid) in zip(gather(calls), actions):
                ep = slot.episode
                if err is not None:
                    fail(slot, f"step {ep.steps}", err)
                    continue
                listed = getattr(ep.obs, "admissible_actions", None)
                on_list = is_listed(action, listed) if listed else None  # None: the environment lists nothing
                if listed:
                    ep.listed_steps += 1
                    ep.admissible_steps += int(on_list)
                ep.repeat_steps += int(bool(ep.steps) and action == ep.last_action)
                ep.last_action = action
                ep.steps += 1
                ep.valid_steps += int(valid)
                if cfg.record_actions:
                    ep.actions.append({"action": action, "valid": valid, "listed": on_list})
                if cfg.record_steps:
                    ep.step_records.append({"t": ep.steps - 1, "anchor": ep.obs.anchor, "reward": float(res.reward),
                                            "valid": bool(valid), "oracle": _oracle_info(res)})
                ep.memory.add(ep.obs.observation, action)
                ep.obs = res
                max_steps = cfg.max_steps or getattr(slot.env, "max_steps", 50)
                if res.done or ep.steps >= max_steps:
                    ep.done = True
                    finish(slot)
    finally:
        for slot in slots:
            _close_quietly(slot.env)
        pool.shutdown(wait=False, cancel_futures=True)
        if bar is not None:
            bar.close()
    return [r for r in records if r is not None], timing


def _record(ep: _Episode, task_types: dict, cfg: RunConfig) -> dict:
    obs = ep.obs
    won = bool(getattr(obs, "won", False)) and not ep.failed
    info = {**ep.first_info, **(dict(getattr(obs, "info", {}) or {}) if obs is not None else {})}
    score = 0.0 if ep.failed else float(info.get("score", float(won)))
    task_type = str(info.get("task_type_name") or info.get("task_type") or task_types.get(ep.task, "") or "")
    rec = dict(task=ep.task, task_index=ep.task_index, episode=ep.episode, seed=ep.seed, task_type=task_type,
               won=won, score=score, steps=ep.steps, valid_steps=ep.valid_steps,
               valid_action_ratio=(ep.valid_steps / ep.steps) if ep.steps else None,
               repeat_steps=ep.repeat_steps, listed_steps=ep.listed_steps, admissible_steps=ep.admissible_steps,
               truncated_responses=ep.truncated_responses, response_tokens=ep.response_tokens,
               failed=ep.failed, error=ep.error)
    if cfg.record_actions:
        rec["actions"] = ep.actions
    if cfg.record_steps:
        rec["step_records"] = ep.step_records
        rec["first_oracle"] = {k: v for k, v in ep.first_info.items() if k.startswith("oracle_")}
    return rec


def _oracle_info(step) -> dict:
    """The ``oracle_*`` entries of an ``EnvStep``'s info (environments with an oracle put them there)."""
    return {k: v for k, v in (getattr(step, "info", None) or {}).items() if k.startswith("oracle_")}


# ----------------------------------------------------------------------------------------------- summary
def _rate(xs) -> float | None:
    xs = list(xs)
    return (sum(xs) / len(xs)) if xs else None


def _ratio(episodes: Sequence[dict], num: str, den: str) -> float | None:
    counted = [e for e in episodes if num in e]
    total = sum(e[den] for e in counted)
    return sum(e[num] for e in counted) / total if total else None


def summarize(episodes: Sequence[dict]) -> dict:
    """Aggregate episode records. Failed episodes count as not solved (score 0) in success rate and mean score;
    mean steps covers the episodes that ran to the end; the valid-action (format) and repeat ratios are over all
    steps taken, the admissible ratio over the steps where the environment listed its admissible actions."""
    ok = [e for e in episodes if not e["failed"]]
    steps = sum(e["steps"] for e in episodes)
    out = {
        "num_episodes": len(episodes),
        "num_failed": len(episodes) - len(ok),
        "success_rate": _rate(e["won"] for e in episodes),
        "success_rate_excluding_failed": _rate(e["won"] for e in ok),
        "mean_score": _rate(e["score"] for e in episodes),
        "mean_steps": _rate(e["steps"] for e in ok),
        "valid_action_ratio": (sum(e["valid_steps"] for e in episodes) / steps) if steps else None,
        "truncated_response_ratio": (sum(e["truncated_responses"] for e in episodes) / steps) if steps else None,
        # loops and off-list actions: what a warm start gets wrong on unseen games (records from before these
        # counters existed give None)
        "repeat_action_ratio": _ratio(episodes, "repeat_steps", "steps"),
        "admissible_action_ratio": _ratio(episodes, "admissible_steps", "listed_steps"),
        "mean_response_tokens": (sum(e["response_tokens"] for e in episodes) / steps) if steps else None,
    }
    types: dict[str, list[dict]] = {}
    for e in episodes:
        types.setdefault(e["task_type"] or "unknown", []).append(e)
    out["per_task_type"] = {
        t: {"num_episodes": len(es), "num_failed": sum(e["failed"] for e in es),
            "success_rate": _rate(e["won"] for e in es), "mean_score": _rate(e["score"] for e in es),
            "mean_steps": _rate(e["steps"] for e in es if not e["failed"])}
        for t, es in sorted(types.items())
    }
    # per task: solved in how many of its K episodes (pass@k style view of the same runs)
    per_task: dict[str, list[bool]] = {}
    for e in episodes:
        per_task.setdefault(e["task"], []).append(bool(e["won"]))
    out["num_tasks"] = len(per_task)
    out["task_solved_any_rate"] = _rate(any(v) for v in per_task.values())
    for k, v in list(out.items()):
        if isinstance(v, float) and not math.isfinite(v):
            out[k] = None
    return out
