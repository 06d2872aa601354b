"""Supervised warm start for agent RL: expert demonstrations rendered with the *training* step prompts
(:mod:`.demos`) and a small causal-LM fine-tuning loop (:mod:`.train`)."""
