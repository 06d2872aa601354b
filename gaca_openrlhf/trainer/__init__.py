"""OpenRLHF integration: step samples, the advantage hook, the trainer actor, metrics and the launcher.

- :mod:`.samples`: episodes -> one Experience per step (:class:`~.samples.StepSamplesGenerator`);
- :mod:`.experience`: ``compute_advantages_and_returns`` -> :mod:`gaca_openrlhf.advantages`;
- :mod:`.minibatch`: an iteration's step samples -> ceil(N / ``--run.mini_batch_steps``) optimizer updates;
- :mod:`.run_options`: the step trainer's ``--run.*`` options; :mod:`.run_shape`: the run's shape (DP size, step
  estimator or not, mini-batch rule), computed once by the CLI;
- :mod:`.actors`: policy actor with a per-iteration mini-batch split, LR per iteration, HF-checkpoint rotation;
- :mod:`.cpu_actors`: that policy actor on the CPU backend and in the rehearsal (blob weight sync, no NCCL);
- :mod:`.ppo_trainer`: :class:`~.ppo_trainer.GacaPPOTrainer` (Ray actor) and the training loop;
- :mod:`.metrics`: ``metrics.jsonl``;
- :mod:`.launch`: ``train(args)`` building the Ray actors on the chosen backend (:mod:`.backends`: GPU as OpenRLHF
  does, CPU with :mod:`gaca_openrlhf.cpu`, or the rehearsal of the GPU one on CPU).
"""
