"""ZeRO-3's blocking coalesced all-gather on gloo (2 ranks): does every parameter hold its value when it returns?

    python tests/gaca_openrlhf/cpu/zero3_gather_race.py unpatched|patched [PORT]

Each rank prints ``[rank R] patched=...: N wrong parameters in REPS x N_PARAMS gathers``. Used by
test_zero3_gather.py (issue 9); ``unpatched`` shows the DeepSpeed race without gaca_openrlhf.cpu.patches.
"""
import os
import sys
import time

import torch
import torch.multiprocessing as mp

N_PARAMS, REPS = int(os.environ.get("N_PARAMS", 48)), int(os.environ.get("REPS", 40))


def worker(rank, world, port, patched):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), DS_ACCELERATOR="cpu")
    if patched:
        from gaca_openrlhf.cpu.patches import apply
        apply()
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}
    with deepspeed.zero.Init(config_dict_or_path=cfg, dtype=torch.bfloat16):
        model = torch.nn.Sequential(*[torch.nn.Linear(64, 64 + i % 7, bias=False) for i in range(N_PARAMS)])
    params = list(model.parameters())
    value = lambda i, p: (torch.arange(p.ds_numel, dtype=torch.float32).view(p.ds_shape) % 97 + i)  # noqa: E731
    with deepspeed.zero.GatheredParameters(params, modifier_rank=0):
        if rank == 0:
            for i, p in enumerate(params):
                p.data.copy_(value(i, p))
    expected = [value(i, p).to(torch.bfloat16) for i, p in enumerate(params)]
    bad, t0 = 0, time.time()
    for _ in range(REPS):
        params[0].all_gather(param_list=params)  # blocking, coalesced: Init._allgather_params_coalesced
        bad += sum(not torch.equal(p.data, expected[i]) for i, p in enumerate(params))
        params[0].partition(param_list=params)
    print(f"[rank {rank}] patched={patched}: {bad} wrong parameters in {REPS} x {N_PARAMS} gathers "
          f"({time.time() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode not in ("patched", "unpatched"):
        raise SystemExit("usage: zero3_gather_race.py patched|unpatched [PORT]")
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 29541
    mp.spawn(worker, args=(2, port, mode == "patched"), nprocs=2, join=True)
