"""Step-level agent rollout: the ``--train.agent_func_path`` file of OpenRLHF (defines ``AgentExecutor``).

OpenRLHF's ``RolloutRayActor`` instantiates ``AgentExecutor()`` and calls :meth:`AgentExecutor.execute` n times
concurrently per task (one call = one episode; the n calls form the task's group). Each step builds its own prompt
(verl-agent's template over task + last k (observation, action) pairs + current observation + admissible actions,
encoded by :func:`agents.prompts.encode_step_prompt`, the same function evaluation uses), samples one response with
per-token log-probs (always: GACA needs them), projects the action as verl-agent does and steps the environment:
by default the projected action is executed even when the response is invalid (``RolloutConfig.invalid_action``),
and the step history holds the projected action. Validity is the format check (verl-agent's); the ablation
``RolloutConfig.validity="admissible"`` also marks an action off the admissible list invalid.

The return value is one dict per *episode* holding per-step records (see :func:`_step_record`); the project's
samples generator (:mod:`gaca_openrlhf.trainer.samples`) turns each step into its own training sample.
Environment faults (``EnvError`` or any exception of reset/step, or a timeout) end the episode with
``failed=True`` instead of raising, so one broken worker never stops the iteration.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from copy import deepcopy

from openrlhf.utils.agent import AgentExecutorBase

from agents.base import is_listed, oracle_progress, step_env, takes_validity
from agents.parsing import judge_response
from agents.prompts import StepMemory, encode_step_prompt, fit_prompt, render_step_prompt
from agents.registry import make_env, prompt_template
from gaca_openrlhf.advantages.hashing import hash_anchor
from gaca_openrlhf.rollout.config import VALIDATION_ROUND_KEY, RolloutConfig
from gaca_openrlhf.seeding import derive_seed, game_identity

logger = logging.getLogger(__name__)


def _step_record(prompt_ids, response_ids, logprobs, reward, valid, anchor, t, truncated, anchor_text=None,
                 listed=None, progress=float("nan")):
    return dict(
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        logprobs=logprobs,  # log pi_old of each response token (vLLM, processed like the trainer's)
        reward=float(reward),
        valid=bool(valid),
        anchor_id=int(anchor),
        anchor_text=anchor_text,  # for --gaca.similarity_grouping (gaca_openrlhf.trainer.anchor_text)
        step_index=int(t),
        truncated=bool(truncated),
        listed=None if listed is None else bool(listed),  # action on the admissible list (None: the env gave none)
        progress=float(progress),  # oracle progress of the step (the credit audit's input; NaN: no oracle)
    )


class AgentExecutor(AgentExecutorBase):
    """Runs one episode per :meth:`execute` call; generic over the registered environments."""

    def __init__(self, config: RolloutConfig | None = None):
        self.config = config or RolloutConfig.from_env()
        self.template = prompt_template(self.config.name)
        self._idle_envs: list = []  # env instances are reused across episodes (ALFWorld: one Ray worker each)
        self._kills_left = self.config.kill_worker_episodes if self.config.kill_worker_at_step >= 0 else 0
        self._episodes_of_task: Counter = Counter()  # task -> episodes started on this engine (seeds, see below)

    def _make_env(self):
        return self._idle_envs.pop() if self._idle_envs else make_env(self.config.name, **self.config.env_kwargs())

    async def _env_call(self, fn, *args):
        return await asyncio.wait_for(asyncio.to_thread(fn, *args), timeout=self.config.timeout_s)

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        cfg = self.config
        task = prompt
        # Same seed, same run: the k-th episode of a task on this engine samples with seeds derived from
        # (run seed, task, k, step). OpenRLHF starts the n executions of a task in order (asyncio.gather), and this
        # count is taken before the first await, so k does not depend on timing.
        # A validation round (the trainer's validation panel, gaca_openrlhf.trainer.validation) counts its episodes
        # from 0 and leaves the round out of the seed: every round plays the same seeds, only the weights differ.
        val_round = (getattr(sampling_params, "extra_args", None) or {}).get(VALIDATION_ROUND_KEY)
        key = task if val_round is None else ("validation", val_round, task)
        k = self._episodes_of_task[key]
        self._episodes_of_task[key] += 1
        # (validation panels may list games by absolute path: their seeds come from the game's identity, so moving the
        # data folder changes nothing, as for evaluation: gaca_openrlhf.seeding.eval_episode_seed)
        episode_seed = derive_seed(cfg.seed, task, k) if val_round is None else derive_seed(
            cfg.seed, "validation", game_identity(task), k)
        out = dict(prompt=prompt, label=label, steps=[], failed=False, error="", won=False, score=0.0,
                   task_type="", traj_uid=episode_seed, env_seconds=0.0, gen_seconds=0.0)
        env = None
        try:
            t0 = time.time()
            env = await self._env_call(self._make_env)
            task_text, obs = await self._env_call(env.reset, task)
            first_info = dict(getattr(obs, "info", {}) or {})
            out["env_seconds"] += time.time() - t0
        except Exception as e:  # env creation/reset fault: the episode is failed, not the iteration
            logger.warning(f"[gaca rollout] env reset failed for task {task!r}: {e!r}")
            out.update(failed=True, error=f"reset: {e!r}")
            await self._close(env)
            return out

        pass_validity = takes_validity(env)
        max_steps = cfg.max_steps or getattr(env, "max_steps", 50)
        memory = StepMemory(k=cfg.history_k)
        prompt_limit = max(1, min(cfg.prompt_max_len, max_length - 1))
        for t in range(max_steps):
            text = render_step_prompt(self.template, task_text, memory, obs.observation, obs.admissible_actions)
            prompt_ids = fit_prompt(encode_step_prompt(hf_tokenizer, text), prompt_limit,
                                    log=lambda m: logger.warning(f"[gaca rollout] {m}"))

            params = deepcopy(sampling_params)
            params.logprobs = 1  # GACA's criticality needs the rollout log-probs, whatever the IS setting
            params.max_tokens = max(1, min(cfg.max_new_tokens, max_length - len(prompt_ids)))
            params.stop = list(cfg.stop)
            params.include_stop_str_in_output = True
            params.seed = derive_seed(episode_seed, t)
            t0 = time.time()
            request_output = await llm_engine.generate(prompt_ids, params)
            out["gen_seconds"] += time.time() - t0
            gen = request_output.outputs[0]
            response_ids = list(gen.token_ids)
            logprobs = [lp[tok].logprob if lp is not None and tok in lp else 0.0
                        for tok, lp in zip(response_ids, gen.logprobs or [None] * len(response_ids))]
            truncated = gen.finish_reason == "length"
            # verl-agent's projection (+ truncated/empty = invalid); the projected action is what runs and is kept
            parsed = judge_response(gen.text, gen.finish_reason, len(response_ids), self.template.tail_chars)
            valid = parsed.valid
            # logged whatever the validity rule (the off-list share, issue 35); the "admissible" rule also penalises it
            listed = is_listed(parsed.action, obs.admissible_actions) if obs.admissible_actions else None
            if cfg.validity == "admissible" and valid and listed is not None:
                valid = listed

            if self._kills_left and t == self.config.kill_worker_at_step and getattr(env, "_actor", None) is not None:
                self._kills_left -= 1
                self._kill_worker(env)
            try:
                t0 = time.time()
                nxt = await self._env_call(step_env, env, parsed.action, valid, cfg.invalid_action, pass_validity)
                out["env_seconds"] += time.time() - t0
            except Exception as e:
                logger.warning(f"[gaca rollout] env step failed for task {task!r} at step {t}: {e!r}")
                out.update(failed=True, error=f"step {t}: {e!r}")
                break
            out["steps"].append(
                _step_record(prompt_ids, response_ids, logprobs, nxt.reward, valid, hash_anchor(obs.anchor), t,
                             truncated, obs.anchor, listed,
                             oracle_progress(getattr(obs, "info", None) or {}, getattr(nxt, "info", None) or {}))
            )
            memory.add(obs.observation, parsed.action)
            obs = nxt
            if nxt.done:
                break
        out["won"] = bool(getattr(obs, "won", False)) and not out["failed"]
        info = {**first_info, **(getattr(obs, "info", {}) or {})}
        out["score"] = float(info.get("score", float(out["won"])))
        out["task_type"] = str(info.get("task_type_name") or info.get("task_type", ""))
        if out["failed"]:
            await self._close(env)  # a broken env is not reused
        else:
            self._idle_envs.append(env)
        return out

    @staticmethod
    def _kill_worker(env) -> None:
        """Fault drill: kill the env's Ray worker as a crash would (the next call must fail the episode)."""
        import ray

        logger.warning("[gaca rollout] fault drill: killing the env worker")
        ray.kill(env._actor, no_restart=True)

    async def _close(self, env) -> None:
        if env is None:
            return
        try:
            await asyncio.wait_for(asyncio.to_thread(env.close), timeout=30)
        except Exception as e:  # closing a dead worker must not fail the episode
            logger.warning(f"[gaca rollout] env close failed: {e!r}")
