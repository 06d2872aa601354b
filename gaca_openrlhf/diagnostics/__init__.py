"""The GACA paper's diagnostics (appendix H): lambda distribution of a run and the within-trajectory
action-disagreement test on a frozen checkpoint. ``python -m gaca_openrlhf.diagnostics --help``."""
