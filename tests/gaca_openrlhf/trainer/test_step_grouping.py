"""StepSamplesGenerator over scripted episodes (the vLLM engines stubbed: they need a model and, on GPU, CUDA).

The real ``generate_samples`` draws prompts from a real stateful dataloader; only ``_run_episodes`` (dispatch to the
engines' agent executors + ``ray.get``) returns scripted episodes. Checks: the n episodes of one task share a group
id (and tasks get distinct ones), trajectories are numbered within the group, failed episodes leave no samples,
padding follows the mini-batch plan, and iteration 1 with most episodes failed stops with a clear message.
"""
from types import SimpleNamespace

import pytest
from torchdata.stateful_dataloader import StatefulDataLoader

from gaca_openrlhf.trainer.minibatch import plan_minibatches
from gaca_openrlhf.trainer.samples import EnvFailureError, StepSamplesGenerator


def _collate(batch):
    return ["ds"] * len(batch), [b["prompt"] for b in batch], [b["label"] for b in batch], [None] * len(batch)


def prompt_loader(n):
    data = [{"prompt": f"task-{i}", "label": f"label-{i}"} for i in range(n)]
    return StatefulDataLoader(data, batch_size=1, shuffle=False, collate_fn=_collate)


def _episode(prompt, n_steps, failed=False):
    steps = [dict(prompt_ids=[1, 2, 3], response_ids=[7, 8], logprobs=[-0.2, -0.4], reward=float(t == n_steps - 1),
                  valid=True, anchor_id=hash((prompt, t)) % 1000, step_index=t, truncated=False)
             for t in range(n_steps)]
    return dict(prompt=prompt, label="", steps=steps, failed=failed, error="boom" if failed else "", won=not failed,
                score=1.0, task_type="pick", gen_seconds=0.1, env_seconds=0.1)


class ScriptedGenerator(StepSamplesGenerator):
    """Episode k of task p has ``script[p][k]`` steps (None: the episode failed)."""

    def __init__(self, script, n_prompts, batch_size, plan_fn=None, dynamic_filtering=False, **kw):
        args = SimpleNamespace(vllm=SimpleNamespace(enable_sleep=False),
                               rollout=SimpleNamespace(batch_size=batch_size),
                               algo=SimpleNamespace(dynamic_filtering_enable=dynamic_filtering))
        super().__init__(strategy=SimpleNamespace(args=args), prompts_dataloader=prompt_loader(n_prompts),
                         eval_dataloader=None, tokenizer=None, vllm_engines=[], plan_fn=plan_fn, **kw)
        self.script = script
        self.dispatched = []

    def _run_episodes(self, prompts, labels, images, **generate_kwargs):
        self.dispatched.append(list(prompts))
        return [[_episode(p, n) if n is not None else _episode(p, 1, failed=True) for n in self.script[p]]
                for p in prompts]


def _meta(samples, key):
    return [int(s.info[key]) for s in samples]


def test_groups_are_tasks_and_failed_episodes_leave_no_samples():
    script = {"task-0": [2, None, 1], "task-1": [1, 3, 2]}
    gen = ScriptedGenerator(script, n_prompts=2, batch_size=2)
    samples, _, consumed, exhausted = gen.generate_samples()
    assert consumed == 2 and gen.dispatched == [["task-0", "task-1"]]
    # task-0: episode 0 (2 steps), episode 1 failed -> nothing, episode 2 (1 step); task-1: 1 + 3 + 2 steps
    assert len(samples) == 9
    assert _meta(samples, "gaca/group_id") == [0, 0, 0, 1, 1, 1, 1, 1, 1]
    assert _meta(samples, "gaca/traj_id") == [0, 0, 2, 0, 1, 1, 1, 2, 2]
    assert _meta(samples, "gaca/step_index") == [0, 1, 0, 0, 0, 1, 2, 0, 1]
    assert _meta(samples, "gaca/dup_of") == [-1] * 9  # no plan: no padding
    assert gen.last_stats["rollout/failed_episodes"] == 1.0 and gen.last_stats["rollout/num_episodes"] == 5.0
    assert gen.last_stats["rollout/num_step_samples"] == 9.0


def test_group_ids_continue_across_iterations_and_padding_follows_plan():
    script = {f"task-{i}": [1, 2] for i in range(4)}
    plan = lambda n: plan_minibatches(n, micro=1, dp=2, mini_batch_steps=4)  # noqa: E731
    gen = ScriptedGenerator(script, n_prompts=4, batch_size=2, plan_fn=plan)
    first, *_ = gen.generate_samples()
    second, *_ = gen.generate_samples()
    # 6 step samples -> ceil(6 / 4) = 2 updates of 4 -> 8 samples, 2 of them masked copies
    assert len(first) == len(second) == 8 and gen.last_plan.updates == 2
    assert sorted(set(_meta(second[:6], "gaca/group_id"))) == [2, 3]  # new tasks, new groups
    assert _meta(first, "gaca/dup_of")[:6] == [-1] * 6 and all(d >= 0 for d in _meta(first, "gaca/dup_of")[6:])
    assert gen.last_stats["rollout/num_padded_samples"] == 2.0


def test_first_iteration_mostly_failed_stops_with_env_setup_message():
    script = {"task-0": [None, None, 1], "task-1": [None, None, None]}
    gen = ScriptedGenerator(script, n_prompts=2, batch_size=2)
    with pytest.raises(EnvFailureError, match="iteration 1: 5/6 episodes failed.*environment setup"):
        gen.generate_samples()


def test_later_failures_need_consecutive_iterations():
    script = {"task-0": [1, 1], "task-1": [None, None], "task-2": [None, None], "task-3": [None, None]}
    gen = ScriptedGenerator(script, n_prompts=4, batch_size=1, max_failed_iters=2)
    gen.generate_samples()  # iteration 1 fine
    gen.generate_samples()  # all failed: 1st failing iteration, no error yet
    with pytest.raises(EnvFailureError, match="2 consecutive iterations"):
        gen.generate_samples()
