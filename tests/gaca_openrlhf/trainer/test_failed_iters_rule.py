"""The rule a week-long run relies on: ``--env.max_failed_iters`` counts *consecutive* bad iterations only.

A bad iteration is one where more than ``--env.max_failed_frac`` of the episodes failed (an environment fault, not
the model). A healthy iteration in between starts the count again, so sporadic failures over days never stop a run;
``max_failed_iters`` bad ones in a row do. Driven through the real ``StepSamplesGenerator.generate_samples`` over a
real stateful dataloader; only ``_run_episodes`` (the vLLM engines' agent executors + ``ray.get``, which need a model
and engines) returns scripted episodes, one task per iteration.
"""
from types import SimpleNamespace

import pytest
from torchdata.stateful_dataloader import StatefulDataLoader

from gaca_openrlhf.trainer.samples import EnvFailureError, StepSamplesGenerator

HEALTHY, BAD = "healthy", "bad"


def _collate(batch):
    return ["ds"] * len(batch), [b["prompt"] for b in batch], [b["label"] for b in batch], [None] * len(batch)


def _episode(prompt, failed):
    steps = [] if failed else [dict(prompt_ids=[1, 2], response_ids=[3], logprobs=[-0.1], reward=1.0, valid=True,
                                    anchor_id=1, step_index=0, truncated=False)]
    return dict(prompt=prompt, label="", steps=steps, failed=failed, error="env worker died" if failed else "",
                won=not failed, score=float(not failed), task_type="pick", gen_seconds=0.1, env_seconds=0.1)


class OneTaskPerIteration(StepSamplesGenerator):
    """Iteration i plays task ``task-i``: 4 episodes, all failed when ``outcomes[i]`` is BAD, else all fine."""

    def __init__(self, outcomes, max_failed_iters):
        args = SimpleNamespace(vllm=SimpleNamespace(enable_sleep=False), rollout=SimpleNamespace(batch_size=1),
                               algo=SimpleNamespace(dynamic_filtering_enable=False))
        data = [{"prompt": f"task-{i}", "label": ""} for i in range(len(outcomes))]
        loader = StatefulDataLoader(data, batch_size=1, shuffle=False, collate_fn=_collate)
        super().__init__(strategy=SimpleNamespace(args=args), prompts_dataloader=loader, eval_dataloader=None,
                         tokenizer=None, vllm_engines=[], max_failed_frac=0.5, max_failed_iters=max_failed_iters)
        self.outcomes = outcomes

    def _run_episodes(self, prompts, labels, images, **generate_kwargs):
        return [[_episode(p, self.outcomes[int(p.split("-")[1])] == BAD) for _ in range(4)] for p in prompts]


def _play(gen, n):
    for _ in range(n):
        gen.generate_samples()


def test_sporadic_failures_over_a_long_run_never_stop_it():
    # Guards: a count that never restarts (`self._failed_iters + 1 if bad else self._failed_iters`) or one that
    # counts bad iterations in total: either stops this run at its 4th iteration.
    outcomes = [HEALTHY] + [BAD, HEALTHY] * 100  # a bad iteration every other one, 100 in all
    gen = OneTaskPerIteration(outcomes, max_failed_iters=2)
    _play(gen, len(outcomes))
    assert gen.last_stats["rollout/failed_episodes"] == 0.0  # the last one ran and was healthy


def test_a_healthy_iteration_restarts_the_count():
    # Guards: the same (a healthy iteration that does not reset the count), and an off-by-one threshold
    # (`>` for `>=`: stopping one bad iteration late, or `max_failed_iters - 1`: one early).
    outcomes = [HEALTHY, BAD, BAD, HEALTHY, BAD, BAD, BAD, HEALTHY]
    gen = OneTaskPerIteration(outcomes, max_failed_iters=3)
    _play(gen, 6)  # two runs of 2 bad iterations, split by a healthy one: below 3 in a row
    with pytest.raises(EnvFailureError, match=r"in 3 consecutive iterations \(last: 4/4\)"):
        gen.generate_samples()  # the 3rd bad iteration in a row


def test_max_failed_iters_in_a_row_stop_the_run_after_healthy_ones():
    # Guards: a rule that only looks at iteration 1 (a run broken later would train on nothing for days).
    outcomes = [HEALTHY] * 5 + [BAD, BAD]
    gen = OneTaskPerIteration(outcomes, max_failed_iters=2)
    _play(gen, 6)
    with pytest.raises(EnvFailureError, match="in 2 consecutive iterations"):
        gen.generate_samples()
