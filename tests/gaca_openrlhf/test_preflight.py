"""gaca_openrlhf.preflight: the start-up checks of examples/gpu, with every external query faked (no Ray cluster,
no server, no disk of that size): the numbers each error names and the exit status."""
from __future__ import annotations

import json

import pytest

from gaca_openrlhf import preflight as pf
from gaca_openrlhf.memory_plan import BUILTIN

GIB = 2 ** 30
ALF = ["--num-nodes", "1", "--gpus", "8", "--env-workers", "128", "--env-worker-cpus", "0.1"]


def run(argv, ray=None, cpus=64, free=10 ** 15, health=None, lookup=None, nodes=()):
    """pf.run_checks on parsed ``argv`` with fakes; ``ray``: a RayInfo, None (no cluster) or an exception;
    ``nodes``: the per-node reports (one Ray task per node in a real run)."""
    def ray_query():
        if isinstance(ray, Exception):
            raise ray
        return ray

    def fetch(url):
        if isinstance(health, Exception):
            raise health
        return health if health is not None else {"goals": 12087}

    return pf.run_checks(pf.build_parser().parse_args(argv), ray_query=ray_query, this_machine_cpus=lambda: cpus,
                         free_fn=lambda path: (path, free), fetch=fetch, config_lookup=lookup or (lambda m: None),
                         node_runner=lambda opts: list(nodes))


def test_ray_cpus_needed_counts_env_workers_bundles_and_trainer():
    need, detail = pf.ray_cpus_needed(gpus=8, env_workers=128, env_worker_cpus=0.1)
    assert need == pytest.approx(21.8)  # README "Env worker CPUs": fits a node with >= 22 CPUs
    assert "128 env workers x 0.1 CPU = 12.8" in detail and "8 placement-group bundles" in detail
    assert pf.ray_cpus_needed(16, 0, 0.1)[0] == 17  # WebShop: no env worker actors


def test_local_ray_without_a_cluster():
    rep = run(ALF, ray=None, cpus=32)
    assert not rep.errors and "a local Ray gets 32 CPUs >= 21.8" in rep.ok[0]
    rep = run(ALF, ray=None, cpus=16)
    (err,) = rep.errors
    assert "this machine's 16 CPUs" in err and "needs 21.8" in err and "ENV_WORKER_CPUS" in err


def test_many_nodes_need_a_running_cluster():
    rep = run(["--num-nodes", "2", "--gpus", "16"], ray=None, cpus=1000)
    (err,) = rep.errors
    assert "NUM_NODES=2" in err and "no Ray cluster is reachable" in err and "ray start --head" in err


def test_cluster_free_cpus_and_gpus():
    ok = pf.RayInfo(free_cpus=200, total_cpus=224, total_gpus=16, nodes=2, address="10.0.0.5:6379")
    rep = run(["--num-nodes", "2", "--gpus", "16", "--env-workers", "128", "--env-worker-cpus", "0.5"], ray=ok)
    assert not rep.errors and "2 node(s), 16 GPUs >= 16" in rep.ok[0]
    busy = pf.RayInfo(free_cpus=20, total_cpus=224, total_gpus=16, nodes=2)
    (err,) = run(["--num-nodes", "2", "--gpus", "16", "--env-workers", "128", "--env-worker-cpus", "0.5"],
                 ray=busy).errors
    assert "20 free CPUs (of 224)" in err and "needs 81" in err and "128 env workers x 0.5 CPU = 64" in err
    one_joined = pf.RayInfo(free_cpus=200, total_cpus=200, total_gpus=8, nodes=1)
    (err,) = run(["--num-nodes", "2", "--gpus", "16"], ray=one_joined).errors
    assert "8 GPUs on 1 node(s), the run needs 16" in err and "wait forever" in err
    (err,) = run(ALF, ray=ConnectionError("refused")).errors
    assert "cannot attach" in err and "refused" in err


def test_explicit_cpu_need_overrides_the_sum():
    rep = run(ALF + ["--ray-cpus-needed", "40"], ray=None, cpus=32)
    assert "needs 40" in rep.errors[0]


def test_model_params(tmp_path):
    cfg = {"hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
           "intermediate_size": 8960, "vocab_size": 151936, "tie_word_embeddings": True, "model_type": "qwen2"}
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    assert pf.model_params(str(tmp_path / "m"), lambda m: None)[0] == BUILTIN["1.5b"].params
    # a Hugging Face name: its cached config.json, else the size in its name
    cached = str(tmp_path / "m" / "config.json")
    params, source = pf.model_params("Qwen/Qwen2.5-1.5B-Instruct", lambda m: cached)
    assert params == BUILTIN["1.5b"].params and "config.json" in source
    assert pf.model_params("Qwen/Qwen2.5-7B-Instruct", lambda m: None)[0] == 7 * 10 ** 9
    assert pf.model_params("Qwen/Qwen2.5-0.5B-Instruct", lambda m: None)[0] == 5 * 10 ** 8
    assert pf.model_params("org/smol-135M", lambda m: None)[0] == 135 * 10 ** 6
    params, why = pf.model_params("org/mystery", lambda m: None)
    assert params is None and "no cached config.json" in why


def test_checkpoint_bytes():
    # 2 ZeRO-3 checkpoints x 16 B + (2 + 1) HF copies at the peak + the final model x 2 B = 40 B per parameter
    assert pf.checkpoint_bytes(10 ** 9, 2) == 40 * 10 ** 9
    assert pf.checkpoint_bytes(10 ** 9, 2, save_hf=False) == 34 * 10 ** 9
    assert pf.checkpoint_bytes(10 ** 9, 5) == (5 * 16 + 7 * 2) * 10 ** 9


def test_disk_check(tmp_path):
    argv = ["--disk", "/runs/x", "--model", "Qwen/Qwen2.5-7B-Instruct", "--ckpt-max-num", "2"]
    (err,) = run(argv, free=100 * GIB).errors  # 7B: 40 B x 7e9 = 260.8 GiB
    assert "100.0 GiB free at /runs/x" in err and "need about 260.8 GiB" in err and "7.00B parameters" in err
    assert "2 DeepSpeed ZeRO-3 checkpoint(s) x 16 B/param" in err and "3 HF checkpoint(s)" in err
    rep = run(argv, free=300 * GIB)
    assert not rep.errors and "300.0 GiB free" in rep.ok[0]
    assert "need about 10.0 GiB" in run(["--disk", "/r", "--disk-needed-gb", "10"], free=GIB).errors[0]
    rep = run(["--disk", "/r", "--model", "org/mystery"], free=GIB)
    assert not rep.errors and "not checked" in rep.warnings[0] and "DISK_NEEDED_GB" in rep.warnings[0]
    # the output folder does not exist yet: its nearest existing parent is measured
    where, free = pf.disk_free(str(tmp_path / "a" / "b" / "c"))
    assert where == str(tmp_path) and free > 0


def test_webshop_url():
    rep = run(["--url", "http://10.0.0.5:3000"], health={"goals": 12087})
    assert not rep.errors and "12087 goals" in rep.ok[0]
    (err,) = run(["--num-nodes", "2", "--url", "http://10.0.0.5:3000"], health=OSError("connection refused")).errors
    assert "http://10.0.0.5:3000/health does not answer" in err and "connection refused" in err
    assert "all 2 nodes must reach this same URL" in err


def test_the_server_check_is_the_envs(monkeypatch):
    """What the URL check names comes from the environment's spec (``EnvSpec.server_preflight``); ``--url`` alone
    means the one registered environment with a server. Catches the spec not asked (a fixed env's words), an env
    without a server accepted, or a guess among several."""
    from agents import registry
    from agents.base import EnvSpec, ServerPreflight

    rep = run(["--env", "webshop", "--num-nodes", "2", "--url", "http://h:1"], health={"goals": 3})
    assert rep.ok == ["WebShop: http://h:1/health answers (3 goals). Env workers on all 2 nodes must reach this same "
                      "URL (WEBSHOP_ADVERTISE_HOST, firewall)."]
    with pytest.raises(SystemExit, match="'alfworld' has no server"):
        run(["--env", "alfworld", "--url", "http://h:1"])
    other = EnvSpec(name="other", label="Other", make_env=None, prompt=None, server_preflight=ServerPreflight(
        reach_hint="OTHER_HOST", describe=lambda health: f"version {health.get('v')}"))
    spec, specs = registry.spec, registry.specs  # the registered ones, and "other" beside them
    monkeypatch.setattr(registry, "spec", lambda name: other if name == "other" else spec(name))
    monkeypatch.setattr(registry, "specs", lambda: specs() + [other])
    rep = run(["--env", "other", "--num-nodes", "3", "--url", "http://o:2"], health={"v": 7})
    assert rep.ok == ["Other: http://o:2/health answers (version 7). Env workers on all 3 nodes must reach this same "
                      "URL (OTHER_HOST)."]
    (err,) = run(["--env", "other", "--url", "http://o:2"], health=OSError("refused")).errors
    assert err.startswith("Other: http://o:2/health does not answer from this node: OSError('refused').")
    with pytest.raises(SystemExit, match=r"needs --env NAME.*\['webshop', 'other'\]"):
        run(["--url", "http://o:2"])


def test_main_exit_status_and_messages(capsys):
    def fakes(cpus):
        return dict(ray_query=lambda: None, this_machine_cpus=lambda: cpus, free_fn=lambda p: (p, 10 ** 15),
                    fetch=lambda u: {"goals": 1}, config_lookup=lambda m: None)

    assert pf.main(ALF + ["--disk", "/r", "--model", "x-1B"], **fakes(64)) == 0
    err = capsys.readouterr().err
    assert err.count("preflight: ok:") == 2 and "error" not in err
    assert pf.main(ALF + ["--url", "http://h:1"], **fakes(4)) == 1
    err = capsys.readouterr().err
    assert "error: preflight: Ray" in err and "preflight failed" in err and "GPU_PREFLIGHT=0" in err
    assert pf.main([], **fakes(1)) == 0  # nothing asked, nothing checked


def test_the_cluster_looked_at_is_the_one_training_attaches_to(monkeypatch):
    """RAY_ADDRESS if set; never a Ray some other program started with ray.init() ("auto" would attach to it)."""
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert pf.training_ray_address() == "10.0.0.5:6379"
    (err,) = run(ALF, ray=ConnectionError("timed out")).errors
    assert "RAY_ADDRESS=10.0.0.5:6379" in err and "timed out" in err


# ---- issue 37: free (not total) GPUs; each node's own resources, on every node ----

def test_free_not_total_gpus_of_the_cluster():
    # A shared cluster: 16 GPUs, 8 of them held by another job's placement group. Guards: comparing total GPUs
    # (the run's placement group would wait up to 30 minutes for GPUs that never come).
    busy = pf.RayInfo(free_cpus=200, total_cpus=224, total_gpus=16, nodes=2, address="h:6379", free_gpus=8)
    (err,) = run(["--num-nodes", "2", "--gpus", "16"], ray=busy).errors
    assert "has 16 GPUs but only 8 free, the run needs 16" in err and "placement groups" in err
    ok = pf.RayInfo(free_cpus=200, total_cpus=224, total_gpus=16, nodes=2, address="h:6379", free_gpus=16)
    rep = run(["--num-nodes", "2", "--gpus", "16"], ray=ok)
    assert not rep.errors and "16 GPUs (16 free) >= 16" in rep.ok[0]


def node_fakes(reports, seen=None):
    """run_checks' per-node runner replaced: the given NodeReports, as if one Ray task per node returned them."""
    def runner(opts):
        if seen is not None:
            seen.append(opts)
        return reports
    return runner


def test_a_failing_node_is_named_and_fails_the_preflight(capsys):
    # Guards: per-node findings dropped, or only the head's looked at.
    from gaca_openrlhf.node_check import NodeReport

    good = NodeReport("node 10.0.0.5 (aaaaaaaa)", ok=["node 10.0.0.5 (aaaaaaaa): GPUs: 8 free of 8"])
    bad = NodeReport("node 10.0.0.6 (bbbbbbbb)",
                     errors=["node 10.0.0.6 (bbbbbbbb): missing on this node: ALFWORLD_DATA=/data/alf"])
    seen = []
    argv = ["--num-nodes", "2", "--gpus-per-node", "8", "--gpu-mem-share", "0.3", "--path", "ALFWORLD_DATA=/data/alf"]
    assert pf.main(argv, node_runner=node_fakes([good, bad], seen)) == 1
    err = capsys.readouterr().err
    assert "preflight: ok: node 10.0.0.5 (aaaaaaaa): GPUs: 8 free of 8" in err
    assert "error: preflight: node 10.0.0.6 (bbbbbbbb): missing on this node: ALFWORLD_DATA=/data/alf" in err
    assert seen == [{"gpus": 8, "share": 0.3, "wait_s": 30.0, "paths": [("ALFWORLD_DATA", "/data/alf")]}]
    assert pf.main(argv, node_runner=node_fakes([good])) == 0


def test_a_node_runner_that_fails_is_an_error():
    def broken(opts):
        raise RuntimeError("node 10.0.0.6 died")
    rep = pf.run_checks(pf.build_parser().parse_args(["--path", "A=/a"]), node_runner=broken)
    assert rep.errors == ["per-node checks could not run on every node: RuntimeError('node 10.0.0.6 died')"]


def test_no_per_node_check_asked_runs_none():
    def never(opts):
        raise AssertionError("not asked")
    assert not pf.run_checks(pf.build_parser().parse_args([]), node_runner=never).errors


def test_host_ram_from_the_memory_plan():
    # 7B on one 8-GPU node: offloaded states (16 B/param) + 8 vLLM sleep backups (2 B/param each) = ~227 GiB, the
    # figure of issue 37 (~230 GB). Guards: the host share left out of the plan, or counted once per cluster.
    from gaca_openrlhf.memory_plan import BUILTIN, host_bytes_per_node

    args = pf.build_parser().parse_args(["--host-ram", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpus-per-node", "8"])
    opts = pf.node_options(args, config_lookup=lambda m: None)
    p = BUILTIN["7b"].params
    assert opts["host_ram_bytes"] == int(16 * p + 8 * 2 * p)
    assert 220 < opts["host_ram_bytes"] / GIB < 235 and "vLLM sleep weight backups" in opts["host_ram_detail"]
    two_nodes, _ = host_bytes_per_node(BUILTIN["7b"], gpus_per_node=8, num_nodes=2)
    assert two_nodes == pytest.approx(8 * p + 16 * p)  # the states are sharded over the nodes, the backups are not
    with pytest.raises(SystemExit, match="--host-ram needs --model"):
        pf.node_options(pf.build_parser().parse_args(["--host-ram"]))
    with pytest.raises(ValueError, match=">= 1"):
        host_bytes_per_node(BUILTIN["7b"], gpus_per_node=0)


def test_bad_per_node_options_are_refused():
    for argv in (["--path", "no-equals-sign"], ["--gpu-mem-share", "1.5"], ["--gpu-mem-share", "0"]):
        with pytest.raises(SystemExit):
            pf.build_parser().parse_args(argv)


def test_the_server_is_checked_from_every_node_with_the_run_token():
    # Guards: WebShop's /health looked at from the head only (other nodes' env workers fail after model loads).
    seen = []
    argv = ["--num-nodes", "2", "--url", "http://10.0.0.5:3000", "--run-token", "run-9"]
    pf.run_checks(pf.build_parser().parse_args(argv), fetch=lambda u: {"goals": 1}, node_runner=node_fakes([], seen))
    assert seen == [{"url": "http://10.0.0.5:3000", "run_token": "run-9"}]
    seen.clear()  # one node, no token: the head's own check is the whole check
    pf.run_checks(pf.build_parser().parse_args(["--url", "http://h:1"]), fetch=lambda u: {"goals": 1},
                  node_runner=node_fakes([], seen))
    assert seen == []
