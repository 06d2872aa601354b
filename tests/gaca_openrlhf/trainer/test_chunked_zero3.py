"""Chunked log-probs (``--run.logprob_chunk_size``) under DeepSpeed ZeRO-3 on 2 gloo ranks with *different* token
counts, so that the ranks' chunk counts differ (no Ray).

ZeRO-3 partitions the output head's weight and all-gathers it on every call of the head module, in the forward pass
and again in the backward pass (the chunk's activation-checkpointed recomputation, and the head's own backward).
Each rank calls the head once per chunk, so with different chunk counts the ranks would run different numbers of
all-gathers: gloo fails ("Received data size doesn't match expected size") or hangs. Here the real policy actor
(OpenRLHF's PolicyModelActor + StepPolicyMixin, built as the Ray actor group would, ``--ds.zero_stage 3``) runs, padded
and packed: the experience forward (no grad, as also the post-sync probe) and the training forward + backward, with
rank 0 holding 1 short sequence (2 chunks of 4 tokens) and rank 1 two longer ones (6-7 chunks). Checked: every call
completes on both ranks, and the per-sample log-probs, entropies and the (ZeRO-3 reduced) gradients equal those of
OpenRLHF's unchunked forward on the same engine to the training dtype's rounding (fp32 and bf16: both CPU families'
paths, whatever this machine's ``auto`` picks; the bounds and their derivation are at the asserts). Without equal
head-call counts the workers fail or hang (killed at the timeout).
"""
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from train_dtypes import TRAIN_DTYPES, unit_roundoff

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
CHUNK = 4
#: per rank: the sequence lengths of its micro-batch (rank 0: 6 tokens = 2 chunks; rank 1: 9 + 14 tokens = 6 chunks
#: packed, 2 x 14 = 7 chunks padded)
LENGTHS = {0: [6], 1: [9, 14]}
WORKER_TIMEOUT = 300


def _batch(rank: int):
    import torch

    g = torch.Generator().manual_seed(10 + rank)
    lengths = LENGTHS[rank]
    seq = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    att = torch.zeros_like(seq)
    for i, n in enumerate(lengths):
        seq[i, :n] = torch.randint(3, 2000, (n,), generator=g)
        att[i, :n] = 1
    mask = att[:, 1:].clone()
    mask[:, :2] = 0  # a 2-token "prompt"
    return seq, att, mask


def worker(rank: int, port: int, out: str, dtype: str) -> None:
    import faulthandler
    import time

    t0 = time.time()
    faulthandler.dump_traceback_later(WORKER_TIMEOUT - 20, exit=True)  # a hang: where each rank waits, in its log
    from gaca_openrlhf.cpu.patches import apply

    apply()
    import deepspeed
    import torch

    from gaca_openrlhf.cli.train_ppo import parse_args
    from gaca_openrlhf.models.tiny import ensure_tiny_model
    from gaca_openrlhf.trainer.actors import GacaPolicyModelActor
    from openrlhf.utils import get_strategy

    model = str(ensure_tiny_model())
    args = parse_args([
        "--actor.model_name_or_path", model, "--actor.num_gpus_per_node", "2", "--vllm.num_engines", "1",
        "--rollout.batch_size", "2", "--rollout.n_samples_per_prompt", "2", "--rollout.micro_batch_size", "2",
        "--algo.kl.init_coef", "0", "--algo.advantage.estimator", "grpo", "--env.name", "toy",
        "--train.micro_batch_size", "1", "--ds.zero_stage", "3", "--ds.attn_implementation", "sdpa",
        "--ds.param_dtype", dtype,
        "--run.logprob_chunk_size", str(CHUNK), "--ckpt.path", os.path.join(out, "ckpt"), "--ckpt.output_dir", out,
    ])
    strategy = get_strategy(args)
    actor = GacaPolicyModelActor(2, rank, "127.0.0.1", port)
    actor.init_model_from_pretrained(strategy, model, max_steps=1, vllm_engines=None)
    policy = actor.actor
    assert "forward" in policy.__dict__, "chunked forward not installed"
    chunked_forward = policy.__dict__["forward"]
    engine = policy.model
    head = engine.module.get_output_embeddings()
    assert head.weight.ds_numel > head.weight.numel(), "the head's weight is not ZeRO-3 partitioned"
    params = [p for _, p in engine.module.named_parameters()]
    seq, att, mask = _batch(rank)

    results = {}
    for packing in (False, True):
        policy.packing_samples = packing
        for chunked in (False, True):
            if chunked:
                policy.forward = chunked_forward
            else:
                policy.__dict__.pop("forward", None)
            print(f"[rank {rank}] {time.time() - t0:.0f}s: {'packed' if packing else 'padded'} "
                  f"{'chunked' if chunked else 'plain'}", flush=True)
            # the experience pass / post-sync probe: no grad, eval mode
            exp_lp = actor.forward(seq, mask, att)
            # the training forward + backward (per-sample weights: the gradient depends on each log-prob)
            policy.train()
            lp, output = policy(seq, mask, attention_mask=att, return_output=True, return_entropy=True)
            ent = output.entropy[:, -mask.shape[1]:] * mask
            weights = torch.arange(1, lp.shape[0] + 1, dtype=torch.float32)[:, None]
            loss = -(lp * weights).sum() / mask.sum() + 0.1 * ent.sum() / mask.sum()
            strategy.backward(loss, policy, actor.actor_optim)
            grads = [deepspeed.utils.safe_get_full_grad(p).detach().clone() for p in params]
            engine.optimizer.zero_grad()
            # the plain forward keeps OpenRLHF's full fp32 logits: their size and scale set the log-prob bound
            logits = None if chunked else output["logits"]
            results[(packing, chunked)] = dict(exp_lp=exp_lp.detach().clone(), lp=lp.detach().clone(),
                                               ent=ent.detach().clone(), grads=grads,
                                               zmax=None if chunked else float(logits.abs().max()),
                                               vocab=None if chunked else logits.shape[-1])
    print(f"[rank {rank}] {time.time() - t0:.0f}s: done", flush=True)
    torch.save(dict(results=results, mask=mask), os.path.join(out, f"result{rank}.pt"))
    torch.distributed.barrier()


#: step-sample tokens whose gradient terms are summed into one parameter's gradient: both ranks' sequences
TOKENS = sum(sum(v) for v in LENGTHS.values())


@pytest.mark.parametrize("dtype", TRAIN_DTYPES)
def test_chunked_logprobs_zero3_uneven_ranks(tmp_path, dtype):
    import torch

    from gaca_openrlhf.models.tiny import ensure_tiny_model

    ensure_tiny_model()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]), DS_ACCELERATOR="cpu",
               OMP_NUM_THREADS="1")
    logs = [tmp_path / f"rank{r}.log" for r in range(2)]
    procs = [subprocess.Popen([sys.executable, __file__, "worker", str(r), str(port), str(tmp_path), dtype], cwd=ROOT,
                              env=env, stdout=open(logs[r], "w"), stderr=subprocess.STDOUT) for r in range(2)]
    try:
        codes = [p.wait(timeout=WORKER_TIMEOUT) for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.wait()
        pytest.fail(f"workers hung (a collective mismatch?):\n{logs[1].read_text()[-3000:]}")
    assert codes == [0, 0], "\n".join(log.read_text()[-3000:] for log in logs)
    # Bounds, derived (Higham: summing n terms in a format of unit roundoff u is off by at most gamma_n sum|term|,
    # gamma_n = n u / (1 - n u); a tree reduction, as torch's vectorised sums, by ceil(log2 n) u sum|term|).
    # - Log-probs and entropies are computed in fp32 in both dtypes (logits upcast before the log-softmax, as OpenRLHF
    #   does); a chunk only regroups GEMM rows, so the logits are the same and the two paths differ by the order of
    #   their fp32 sums over the vocabulary V (logsumexp, sum p z): |delta| <= 2 ceil(log2 V) u32 (max|z| + log V).
    #   Measured (AVX2, 2026-12-04): log-probs bitwise equal; entropies up to 4.8e-6 (fp32) and 1.0e-5 (bf16; V = 2048,
    #   bound 2.1e-5): the old fixed 1e-5 was at the bf16 figure.
    # - Gradients are accumulated in the training dtype: each element sums n = TOKENS per-token terms (both ranks),
    #   grouped by chunk in one path and by one GEMM in the other, each computation within gamma_n sum|term| of the
    #   exact sum, so |chunked - plain| <= 2 n u sum|term|. sum|term| is taken at the gradient's scale, max|g| (this
    #   loss weights every token's log-prob and entropy with one sign per sequence): bound 2 n u max|g|, n = 29,
    #   i.e. 58 u = 3.5e-6 max|g| in fp32 and 0.23 max|g| in bf16 (the fixed 1e-5 max(1, max|g|) was 1e-5 absolute
    #   for gradients of 8.5e-3: 1.2 ulp in bf16). Measured (AVX2 with GACA_CPU_DTYPE, 2026-12-04): fp32 8.0 u max|g|,
    #   bf16 1.8 u max|g|. In bf16 the gradient check is coarse by nature; a wrong chunk is caught by the log-probs and
    #   entropies, exact to fp32 in both dtypes.
    u32 = unit_roundoff("fp32")
    u = unit_roundoff(dtype)
    grad_bound = 2 * TOKENS
    worst, widest = 0.0, (0.0, 0.0)
    for rank in range(2):
        saved = torch.load(tmp_path / f"result{rank}.pt", weights_only=False)
        res, mask = saved["results"], saved["mask"].bool()
        for packing in (False, True):
            plain, chunked = res[(packing, False)], res[(packing, True)]
            what = f"{dtype} rank {rank} {'packed' if packing else 'padded'}"
            vocab = plain["vocab"]
            atol = 2 * math.ceil(math.log2(vocab)) * u32 * (plain["zmax"] + math.log(vocab))
            for key in ("exp_lp", "lp", "ent"):
                a, b = chunked[key], plain[key]
                a, b = (a[mask], b[mask]) if key != "ent" else (a, b)
                gap = float((a - b).abs().max())
                widest = max(widest, (gap, atol))
                assert gap <= atol, f"{what}: {key} differs by {gap:.3g} > {atol:.3g}"
            for i, (a, b) in enumerate(zip(chunked["grads"], plain["grads"])):
                scale = float(b.abs().max())
                assert scale > 0, f"{what}: parameter {i} got no gradient"
                ratio = float((a.double() - b.double()).abs().max()) / (u * scale)
                worst = max(worst, ratio)
                assert ratio <= grad_bound, f"{what}: param {i}: |chunked - plain| = {ratio:.2f} u max|g|"
    print(f"{dtype}: largest gradient difference {worst:.2f} u max|g| (bound {grad_bound}); largest log-prob/entropy "
          f"difference {widest[0]:.3g} (bound {widest[1]:.3g}, V = {vocab})")


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
