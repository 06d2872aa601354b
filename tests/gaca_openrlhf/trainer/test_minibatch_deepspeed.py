"""The real policy actor (OpenRLHF's PolicyModelActor + StepPolicyMixin, DeepSpeed ZeRO-2) on 2 gloo ranks, no Ray.

Two processes each build the actor from the tiny model (as the Ray actor group would, minus Ray) and are fed the
micro-batches the trainer would send them: the real step samples -> ``pad_to_multiple`` -> ``split_rollout_samples``
-> ``compute_advantages_and_returns`` (GRPO) -> the actor's own log-prob forward -> ``append`` ->
``set_iteration_batch`` -> ``fit``. Checked:

1. iteration 1 (7 step samples + 1 masked padding copy, 1 update): the update equals a plain-PyTorch fp32 gradient
   of the PPO loss at ratio 1 over the 7 real samples, token-mean normalized (computed here by hand with
   ``transformers``, no OpenRLHF/DeepSpeed). AdamW with eps 1e3 makes the first step -lr g / (|g| + eps) ~ -g, so
   the fp32 master-weight change *is* the gradient. A copy in the loss, or counted in the normalization, or the
   accumulation not spanning both ranks' micro-batches, moves it by 12-100 %.
2. iterations 2 and 3 (10 and 17 samples, mini-batch 8): DeepSpeed makes ceil(10/8) = 2 and ceil(17/8) = 3
   optimizer steps (``train/optimizer_steps``), and the LR is the cosine schedule's value at iterations 1 and 2 of 3
   (constant within the iteration).
3. three checkpoints with ``--ckpt.save_hf --ckpt.max_num 2``: two HF copies are left, as DeepSpeed's.

The ``packed`` variant runs the same checks with packed samples, token-budget micro-batches
(``--train.dynamic_batch_enable``: DeepSpeed without accumulation, the optimizer stepped at each update window's end)
and chunked log-probs: the same update counts, LR and reference gradient.
"""
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
LR, EPS = 1000.0, 1000.0

# (group, traj, step, reward, prompt ids, response ids); GRPO mean_norm advantages by hand:
# group 0: episode scores (1, 1 | 0) -> mean 2/3 -> A = 1/3, 1/3, -2/3
# group 1: (0, 0 | 1, 1) -> mean 1/2 -> A = -1/2, -1/2, 1/2, 1/2
STEPS = [
    (0, 0, 0, 0.0, [11, 12, 13], [40, 41]),
    (0, 0, 1, 1.0, [11, 14, 15, 16], [42, 43, 44]),
    (0, 1, 0, 0.0, [11, 12], [45, 46, 47, 48]),
    (1, 0, 0, 0.0, [21, 22, 23], [50]),
    (1, 0, 1, 0.0, [21, 24], [51, 52]),
    (1, 1, 0, 0.0, [21, 22, 25, 26], [53, 54, 55]),
    (1, 1, 1, 1.0, [21, 27], [56, 57]),
]
ADVANTAGES = [1 / 3, 1 / 3, -2 / 3, -0.5, -0.5, 0.5, 0.5]


def _samples(steps):
    from gaca_openrlhf.trainer.samples import step_experience

    out = []
    for group, traj, t, reward, prompt, response in steps:
        step = dict(prompt_ids=prompt, response_ids=response, logprobs=[-1.0] * len(response), reward=reward,
                    valid=True, anchor_id=1000 * group + 10 * traj + t, step_index=t, truncated=False)
        out.append(step_experience(step, group, traj, dict(prompt="p", label="", score=0.0)))
    return out


def _more_steps(n, offset):
    """n extra step samples in groups of 4 episodes x 1 step (rewards alternate)."""
    return [(offset + i // 4, i % 4, 0, float(i % 2), [30 + i % 7, 31], [60 + i % 9, 61]) for i in range(n)]


#: extra options of the packed variant: packed micro-batches (on the CPU backend's variable-length attention, which
#: the setup hook registered in this worker), token-budget micro-batches of at most 24 tokens (1-3 samples each)
#: and log-probs in chunks of 4 tokens
PACKED = ["--ds.packing_samples", "--train.dynamic_batch_enable", "--train.max_tokens_per_gpu", "24",
          "--rollout.max_tokens_per_gpu", "24", "--run.logprob_chunk_size", "4",
          "--ds.attn_implementation", "gaca_varlen_sdpa"]


def worker(rank: int, port: int, out: str, variant: str = "padded") -> None:
    from gaca_openrlhf.cpu.patches import apply

    apply()
    import deepspeed
    import torch

    from gaca_openrlhf.cli.train_ppo import parse_args
    from gaca_openrlhf.models.tiny import ensure_tiny_model
    from gaca_openrlhf.trainer.actors import GacaPolicyModelActor
    from gaca_openrlhf.trainer.experience import StepExperienceMaker
    from gaca_openrlhf.trainer.ppo_trainer import advantage_config
    from gaca_openrlhf.trainer.samples import pad_to_multiple
    from openrlhf.utils import get_strategy

    model = str(ensure_tiny_model())
    args = parse_args([
        "--actor.model_name_or_path", model, "--actor.num_gpus_per_node", "2", "--vllm.num_engines", "1",
        "--rollout.batch_size", "2", "--rollout.n_samples_per_prompt", "2", "--rollout.micro_batch_size", "2",
        "--algo.kl.init_coef", "0", "--algo.advantage.estimator", "grpo", "--gaca.mode", "mean_norm",
        "--env.name", "toy", "--train.micro_batch_size", "1", "--run.mini_batch_steps", "8", "--ds.zero_stage", "2",
        "--ds.attn_implementation", "sdpa", "--actor.adam.lr", str(LR), "--actor.adam.eps", str(EPS),
        "--actor.adam.betas", "0.9", "0.999", "--actor.lr_scheduler", "cosine", "--actor.lr_warmup_ratio", "0",
        "--actor.max_norm", "1e9", "--ckpt.path", os.path.join(out, "ckpt"), "--ckpt.output_dir", out,
        "--ckpt.save_hf", "--ckpt.max_num", "2",
    ] + (PACKED if variant == "packed" else []))
    strategy = get_strategy(args)
    actor = GacaPolicyModelActor(2, rank, "127.0.0.1", port)
    actor.init_model_from_pretrained(strategy, model, max_steps=3, vllm_engines=None)
    maker = StepExperienceMaker.__new__(StepExperienceMaker)
    maker.args, maker.tokenizer, maker.advantage_estimator = args, actor.tokenizer, "grpo"
    maker.adv_config, maker.dump_dir, maker.last_stats, maker.iteration = advantage_config(args), None, {}, 0
    params = [p for _, p in actor.actor.model.module.named_parameters()]
    attn = actor.actor.model.module.config._attn_implementation
    assert attn == ("gaca_varlen_sdpa" if variant == "packed" else "sdpa"), attn

    def iteration(samples, index):
        plan = args.run_shape.plan(len(samples))  # micro 1 x 2 ranks, mini-batches of 8
        samples = pad_to_multiple(samples, plan.padded, seed=index)
        micro = maker.compute_advantages_and_returns(maker.split_rollout_samples(samples))
        mine = micro[rank * len(micro) // 2 : (rank + 1) * len(micro) // 2]  # async_run_method_batch's chunk
        for exp in mine:
            exp.action_log_probs = actor.forward(exp.sequences, exp.action_mask, exp.attention_mask)
            actor.append(exp)
        actor.set_iteration_batch(plan, iteration=index)
        status = actor.fit(kl_ctl=0)
        return plan, status, actor.actor_optim.param_groups[0]["lr"]

    before = [deepspeed.utils.safe_get_full_fp32_param(p).detach().clone() for p in params]
    plan, status, lr = iteration(_samples(STEPS), 0)
    after = [deepspeed.utils.safe_get_full_fp32_param(p).detach().clone() for p in params]
    records = [dict(samples=7, padded=plan.padded, updates=plan.updates, steps=status["train/optimizer_steps"],
                    lr=lr, actor_lr=status.get("actor_lr"), policy_loss=status.get("policy_loss"))]
    for index, n in ((1, 10), (2, 17)):
        plan, status, lr = iteration(_samples(_more_steps(n, offset=10 * index)), index)
        records.append(dict(samples=n, padded=plan.padded, updates=plan.updates,
                            steps=status["train/optimizer_steps"], lr=lr, actor_lr=status.get("actor_lr"),
                            policy_loss=status.get("policy_loss")))
    for step in (1, 2, 3):  # DeepSpeed + HF checkpoints, --ckpt.max_num 2
        actor.save_checkpoint(f"global_step{step}", client_states={"global_step": step})
    if rank == 0:
        torch.save({"delta": [a - b for a, b in zip(after, before)], "before": before, "records": records},
                   os.path.join(out, "result.pt"))
    torch.distributed.barrier()


def reference_gradient(model_dir: str, before):
    """d/dtheta of the PPO loss at ratio 1 over the 7 real samples: -sum_i A_i sum_t logp_it / (all tokens)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    with torch.no_grad():
        for p, w in zip(model.parameters(), before):
            p.copy_(w.reshape(p.shape))
    total_tokens = sum(len(s[5]) for s in STEPS)
    loss = 0.0
    for (_, _, _, _, prompt, response), adv in zip(STEPS, ADVANTAGES):
        ids = torch.tensor([prompt + response])
        logits = model(ids).logits[0, :-1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]
        loss = loss - adv * logp[-len(response):].sum() / total_tokens
    loss.backward()
    return [p.grad.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("variant", ["padded", "packed"])
def test_real_actor_two_ranks(tmp_path, variant):
    import torch

    from gaca_openrlhf.models.tiny import ensure_tiny_model

    model = str(ensure_tiny_model())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT), DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, __file__, "worker", str(r), str(port), str(tmp_path), variant],
                              cwd=ROOT, env=env,
                              stdout=open(tmp_path / f"rank{r}.log", "w"), stderr=subprocess.STDOUT) for r in range(2)]
    codes = [p.wait(timeout=500) for p in procs]
    assert codes == [0, 0], (tmp_path / "rank0.log").read_text()[-4000:]
    result = torch.load(tmp_path / "result.pt", weights_only=False)
    recs = result["records"]
    print(json.dumps(recs, indent=1))
    assert [(r["padded"], r["updates"], r["steps"]) for r in recs] == [(8, 1, 1.0), (12, 2, 2.0), (18, 3, 3.0)]
    for i, r in enumerate(recs):  # cosine over 3 iterations, held within each
        want = LR * 0.5 * (1 + math.cos(math.pi * i / 3))
        assert r["lr"] == pytest.approx(want, rel=1e-6) and r["actor_lr"] == pytest.approx(want, rel=1e-6)
        assert math.isfinite(r["policy_loss"])
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.glob("global_step*_hf")) == ["global_step2_hf", "global_step3_hf"]
    assert sorted(p.name for p in (ckpt / "_actor").glob("global_step*")) == ["global_step2", "global_step3"]
    ref = reference_gradient(model, result["before"])
    got = [-d.reshape(g.shape) for d, g in zip(result["delta"], ref)]  # -lr g / (|g| + eps), lr = eps
    num = math.sqrt(sum(float(((a - b) ** 2).sum()) for a, b in zip(got, ref)))
    den = math.sqrt(sum(float((b ** 2).sum()) for b in ref))
    assert den > 0 and num / den < 0.05, f"update vs reference gradient: relative error {num / den:.3f}"


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], *sys.argv[5:6])
