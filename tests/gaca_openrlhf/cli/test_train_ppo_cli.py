"""The CLI reuses OpenRLHF's parser and validation and adds the project's options."""
import pytest

from gaca_openrlhf.cli.train_ppo import parse_args  # noqa: E402
from gaca_openrlhf.rollout import AGENT_FUNC_PATH  # noqa: E402
from gaca_openrlhf.trainer.ppo_trainer import advantage_config  # noqa: E402

BASE = ["--actor.model_name_or_path", "m", "--actor.num_gpus_per_node", "1", "--vllm.num_engines", "1",
        "--rollout.batch_size", "4", "--rollout.n_samples_per_prompt", "2", "--algo.kl.init_coef", "0"]


def test_project_estimators_and_options():
    args = parse_args(BASE + ["--algo.advantage.estimator", "gaca", "--gaca.alpha", "0.25", "--env.name", "toy",
                              "--train.batch_size", "4"])
    assert args.train.agent_func_path == AGENT_FUNC_PATH and args.reward.remote_url == ["agent"]
    cfg = advantage_config(args)
    assert cfg.estimator == "gaca" and cfg.alpha == 0.25 and cfg.lambda0 == 0.5
    assert args.critic.model_name_or_path is None  # OpenRLHF's validation ran
    assert args.run_shape.updates_per_iteration == 2  # 4 x 2 // train batch 4


def test_openrlhf_estimators_still_accepted_and_validation_kept():
    args = parse_args(BASE + ["--algo.advantage.estimator", "group_norm", "--reward.remote_url", "http://rm"])
    assert args.algo.advantage.estimator == "group_norm" and args.train.agent_func_path is None
    with pytest.raises(SystemExit):  # OpenRLHF estimators cannot consume step samples
        parse_args(BASE + ["--algo.advantage.estimator", "group_norm", "--train.agent_func_path", AGENT_FUNC_PATH])
    with pytest.raises(SystemExit):
        parse_args(BASE + ["--algo.advantage.estimator", "nope"])
    with pytest.raises(AssertionError):  # OpenRLHF's own check: n > 1 for group estimators
        parse_args(BASE[:-4] + ["--rollout.n_samples_per_prompt", "1", "--algo.advantage.estimator", "rloo"])


def test_step_estimator_needs_kl_loss():
    with pytest.raises(SystemExit):
        parse_args(BASE[:-2] + ["--algo.kl.init_coef", "0.01", "--algo.advantage.estimator", "grpo"])


def _step(*extra):
    return BASE + ["--algo.advantage.estimator", "gaca", "--env.name", "toy", *extra]


def test_mini_batch_steps_sets_the_deepspeed_batch():
    args = parse_args(_step("--actor.num_gpus_per_node", "4", "--train.micro_batch_size", "2",
                            "--run.mini_batch_steps", "16"))
    assert args.run.mini_batch_steps == 16 and args.train.batch_size == 16
    with pytest.raises(SystemExit, match="multiple of --train.micro_batch_size x DP ranks = 2 x 4"):
        parse_args(_step("--actor.num_gpus_per_node", "4", "--train.micro_batch_size", "2",
                         "--run.mini_batch_steps", "12"))
    with pytest.raises(SystemExit, match="not both"):
        parse_args(_step("--run.mini_batch_steps", "4", "--run.updates_per_iteration", "2"))


def test_deprecated_update_count_checks_deepspeed_batch():
    """The WebShop script's old --train.batch_size 64 with micro 16 on 8 ranks failed inside DeepSpeed."""
    with pytest.raises(SystemExit, match="--train.batch_size 64 must be a multiple"):
        parse_args(_step("--actor.num_gpus_per_node", "8", "--train.micro_batch_size", "16",
                         "--train.batch_size", "64", "--rollout.batch_size", "16"))


def test_step_estimators_reject_a_single_rollout_per_task():
    with pytest.raises(SystemExit, match="n_samples_per_prompt must be >= 2"):
        parse_args(_step("--rollout.n_samples_per_prompt", "1"))


def test_step_estimators_need_vllm_engines():
    i = BASE.index("--vllm.num_engines")
    argv = BASE[:i] + BASE[i + 2:] + ["--algo.advantage.estimator", "grpo", "--env.name", "toy"]
    with pytest.raises(SystemExit, match="--vllm.num_engines"):
        parse_args(argv)


def test_openrlhf_launch_checks_restored():
    colocated = ["--train.colocate_all", "--actor.num_gpus_per_node", "4", "--ref.num_gpus_per_node", "4"]
    with pytest.raises(SystemExit, match=r"actor GPUs \(4.*engines x TP \(1 x 2\)"):
        parse_args(_step(*colocated, "--vllm.tensor_parallel_size", "2"))
    assert parse_args(_step(*colocated, "--vllm.num_engines", "2", "--vllm.tensor_parallel_size", "2"))
    with pytest.raises(SystemExit, match="reference model"):
        parse_args(_step("--train.colocate_actor_ref", "--actor.num_gpus_per_node", "4", "--ref.num_gpus_per_node",
                         "2", "--algo.kl.init_coef", "0.01", "--algo.kl.use_loss"))


def test_sync_gap_limit_option():
    assert parse_args(_step()).run.max_logprob_gap == pytest.approx(0.1)
    assert parse_args(_step("--run.max_logprob_gap", "0")).run.max_logprob_gap == 0.0


def test_param_dtype_auto_is_resolved_before_anything_reads_it(monkeypatch):
    import gaca_openrlhf.cpu as cpu

    monkeypatch.setattr(cpu, "fast_bf16", lambda: False)
    monkeypatch.delenv(cpu.CPU_DTYPE_ENV, raising=False)
    base = BASE + ["--algo.advantage.estimator", "gaca", "--train.batch_size", "4"]
    assert parse_args(base + ["--run.backend", "cpu"]).ds.param_dtype == "fp32"  # the default is auto
    assert parse_args(base + ["--run.backend", "cpu", "--ds.param_dtype", "bf16"]).ds.param_dtype == "bf16"
    assert parse_args(base + ["--run.backend", "gpu"]).ds.param_dtype == "bf16"
    with pytest.raises(SystemExit, match="CPU backend"):
        parse_args(base + ["--run.backend", "gpu", "--ds.param_dtype", "fp32"])
    monkeypatch.setattr(cpu, "fast_bf16", lambda: True)
    assert parse_args(base + ["--run.backend", "cpu"]).ds.param_dtype == "bf16"
    monkeypatch.setenv(cpu.CPU_DTYPE_ENV, "fp32")  # the suite's switch: this machine's other dtype path
    assert parse_args(base + ["--run.backend", "cpu"]).ds.param_dtype == "fp32"


def test_packing_and_token_budget_accepted_with_step_samples():
    """Packing / dynamic batches are accepted with step samples; without flash-attn the packed path runs on the CPU
    backend's variable-length attention (CPU, rehearsal); a GPU node without flash-attn refuses it (next test)."""
    from transformers.utils import is_flash_attn_2_available

    packed = ("--ds.packing_samples", "--train.dynamic_batch_enable", "--train.max_tokens_per_gpu", "4096",
              "--run.mini_batch_steps", "4", "--run.logprob_chunk_size", "512")
    args = parse_args(_step(*packed, "--run.backend", "cpu"))
    assert args.ds.packing_samples and args.train.dynamic_batch_enable
    assert args.rollout.max_tokens_per_gpu == 4096 and args.run.logprob_chunk_size == 512
    if not is_flash_attn_2_available():
        assert args.ds.attn_implementation == "gaca_varlen_sdpa"
        assert parse_args(_step(*packed, "--run.backend", "rehearsal")).ds.attn_implementation == "gaca_varlen_sdpa"
        # no CUDA here: the GPU backend's command still parses (the scripts' dry runs); a GPU node refuses (below)
        assert parse_args(_step(*packed, "--run.backend", "gpu")).ds.attn_implementation == "sdpa"
        assert parse_args(_step("--run.backend", "cpu")).ds.attn_implementation == "flash_attention_2"  # unpacked
    args = parse_args(_step("--train.dynamic_batch_enable", "--run.mini_batch_steps", "4"))
    assert args.ds.packing_samples  # OpenRLHF's validation: dynamic batches pack
    assert parse_args(_step("--train.batch_size", "4")).run.logprob_chunk_size == 0  # off by default
    with pytest.raises(SystemExit, match="ring_attn_size"):
        parse_args(_step("--ds.packing_samples", "--ds.ring_attn_size", "2", "--actor.num_gpus_per_node", "2",
                         "--run.mini_batch_steps", "4"))


def test_packing_without_flash_attn_on_a_gpu_node_is_refused(monkeypatch):
    """A GPU node without flash-attn: packed micro-batches would run on sdpa with a dense mask over the packed row
    (the silent slow path of issue 37): refused, naming the cause and both ways out. ``torch.cuda.is_available``
    is patched to True: it stands in for a CUDA node (none here); flash-attn is really absent here.
    Guards: the refusal dropped (back to the silent sdpa switch), or applied to the CPU backend / rehearsal, or to
    unpacked runs."""
    import torch

    from gaca_openrlhf.cli.train_ppo import PACKING_NEEDS_FLASH_ATTN

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    packed = ("--ds.packing_samples", "--train.dynamic_batch_enable", "--train.max_tokens_per_gpu", "32768",
              "--run.mini_batch_steps", "4")
    with pytest.raises(SystemExit) as err:
        parse_args(_step(*packed, "--run.backend", "gpu"))
    msg = str(err.value)
    assert msg == PACKING_NEEDS_FLASH_ATTN.format(budget=32768)
    assert "up to 32768 tokens" in msg and "PACKING=0" in msg and "scripts/setup.sh" in msg
    with pytest.raises(SystemExit, match="flash-attn is not installed"):  # dynamic batches pack too
        parse_args(_step("--train.dynamic_batch_enable", "--run.mini_batch_steps", "4", "--run.backend", "gpu"))
    # unpacked on the GPU backend, and packed on the CPU backend / rehearsal: accepted
    assert not parse_args(_step("--run.backend", "gpu")).ds.packing_samples
    assert parse_args(_step(*packed, "--run.backend", "rehearsal")).ds.attn_implementation == "gaca_varlen_sdpa"


def test_dynamic_filtering_with_step_samples_keeps_its_meaning_or_refuses():
    """--algo.dynamic_filtering_enable drops task groups without outcome contrast (trainer/samples.py); OpenRLHF's
    mean-score range has no meaning there, so a non-default range is refused instead of silently ignored."""
    args = parse_args(_step("--algo.dynamic_filtering_enable"))
    assert args.algo.dynamic_filtering_enable
    with pytest.raises(SystemExit, match="dynamic_filtering_range is not used with step samples"):
        parse_args(_step("--algo.dynamic_filtering_enable", "--algo.dynamic_filtering_range", "0.1", "0.9"))
