"""Typed configuration of the step-level advantage estimators (docs/design.md §3).

Every field documents itself through ``field(metadata={"help": ...})`` so that a CLI (``--gaca.*``) can build its
options and help text from this one place (see :func:`AdvantageConfig.help`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

import torch

Mode = Literal["mean_std_norm", "mean_norm"]
EpisodeStats = Literal["steps", "trajectories"]
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
SingletonRule = Literal["auto", "zero", "group"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class AdvantageConfig:
    """Hyper-parameters of all registered estimators; each estimator reads only the fields it needs."""

    estimator: str = field(
        default="gaca",
        metadata={
            "help": "Registered estimator name: grpo | gigpo | gaca | fixed_mixture | gaca_permuted | hgpo | empg | ..."
        },
    )
    mode: Mode = field(
        default="mean_std_norm",
        metadata={
            "help": "Group normalization (rules 3-4): 'mean_std_norm' = (x - mean) / (unbiased std + eps); "
            "'mean_norm' = x - mean (verl-agent uses it for its web-shopping benchmark)."
        },
    )
    gamma: float = field(default=0.95, metadata={"help": "Discount of the step return R_t (rule 2), in [0, 1]."})
    invalid_penalty: float = field(
        default=0.1,
        metadata={"help": "c: subtracted from the episode score and the step return of an invalid step (rules 1-2)."},
    )
    eps: float = field(default=1e-6, metadata={"help": "Added to the std in 'mean_std_norm' (rules 3-4)."})
    omega: float = field(default=1.0, metadata={"help": "GiGPO step-advantage weight: A = A^E + omega A^S (rule 7)."})
    lambda0: float = field(default=0.5, metadata={"help": "GACA gate base: lambda = clip(lambda0 (1 + alpha c)) (rule 6)."})
    alpha: float = field(default=0.5, metadata={"help": "GACA gate slope on the criticality c (rule 6); paper: 0.25/0.5/1."})
    alpha_c: float = field(
        default=1.0,
        metadata={"help": "NLL share ablation (rule 7): c' = alpha_c c + (1 - alpha_c); 1 = plain GACA."},
    )
    fixed_lambda: float = field(
        default=0.5,
        metadata={"help": "fixed_mixture weight in [0, 1]: 0 = episode advantage only, 1 = step advantage only."},
    )
    episode_stats: EpisodeStats = field(
        default="steps",
        metadata={
            "help": "Episode statistics (rule 3): 'steps' = mean/std over all step samples of the group "
            "(GiGPO's compute_mean_std_cross_steps=True); 'trajectories' = one score per trajectory "
            "(the score of its first step sample)."
        },
    )
    singleton_rule: SingletonRule = field(
        default="auto",
        metadata={
            "help": "Step advantage of a singleton anchor group (rule 4): 'zero' (GiGPO), 'group' (normalize with all "
            "step returns of the task group; GACA), 'auto' = the estimator's own default."
        },
    )
    permutation_seed: int = field(
        default=0, metadata={"help": "Seed of the within-trajectory criticality permutation (gaca_permuted ablation)."}
    )
    # ---------------------------------------------------------------- HGPO (verl-agent recipe/hgpo)
    history_length: int = field(
        default=2,
        metadata={
            "help": "HGPO: history groups over the last k anchors of the trajectory, k = 1 .. history_length + 1 "
            "(public recipe default 2)."
        },
    )
    length_weight_alpha: float = field(
        default=1.0,
        metadata={"help": "HGPO: a history group of length k weighs (k + 1)^length_weight_alpha (recipe default 1.0)."},
    )
    base_group: bool = field(
        default=False,
        metadata={"help": "HGPO: also average in the episode advantage as a k = 0 item of weight 1 (default off)."},
    )
    # ---------------------------------------------------------------- similarity grouping (GiGPO enable_similarity)
    similarity_grouping: bool = field(
        default=False,
        metadata={
            "help": "Anchor groups (GiGPO/GACA/HGPO) join anchor texts of the same task group whose difflib "
            "SequenceMatcher ratio >= similarity_threshold (GiGPO's enable_similarity); needs the anchor text."
        },
    )
    similarity_threshold: float = field(
        default=0.95, metadata={"help": "Similarity grouping: minimum ratio in (0, 1) (GiGPO default 0.95)."}
    )
    similarity_max_comparisons: int = field(
        default=20000,
        metadata={
            "help": "Similarity grouping: cap on full ratio computations per task group; past it, remaining distinct "
            "texts only join exact matches (bounds the cost; the public code compares all pairs)."
        },
    )
    # ---------------------------------------------------------------- EMPG (arXiv 2509.09265)
    empg_k: float = field(
        default=1.0, metadata={"help": "EMPG: k of the self-calibrating scale g(H) = exp(-k H) / mean exp(-k H)."}
    )
    empg_k_future: float = field(
        default=1.0, metadata={"help": "EMPG: k' of the future-clarity term f(H) = exp(-k' H) of the next step."}
    )
    empg_zeta: float = field(default=0.1, metadata={"help": "EMPG: weight zeta of the future-clarity bonus."})
    empg_zero_mean: bool = field(
        default=True, metadata={"help": "EMPG: subtract the batch mean of the modulated advantage (final step)."}
    )
    # ---------------------------------------------------------------- any estimator
    center: Literal["none", "group", "batch"] = field(
        default="none",
        metadata={
            "help": "Subtract the mean of the final advantages over the step samples of each task group ('group') "
            "or of the whole batch ('batch'); 'none' = each estimator as published. A non-zero mean over the "
            "step samples pushes every sampled token's log-prob up (positive: self-imitation) or down, whatever "
            "the credit says. GRPO's and GiGPO's episode term is zero-mean per group over its step samples "
            "(episode_stats 'steps'); a per-step gate (GACA) or a step term with a singleton fallback need not "
            "be. Centring separates that shift from the credit's direction (docs/design.md §3.4)."
        },
    )
    dtype: Literal["float32", "float64"] = field(
        default="float32",
        metadata={"help": "dtype of the returned tensors; all arithmetic runs in float64 regardless."},
    )

    def __post_init__(self) -> None:
        for name in ("base_group", "similarity_grouping", "empg_zero_mean"):  # CLI strings -> bool
            value = getattr(self, name)
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in _TRUE + _FALSE:
                    raise ValueError(f"{name} must be true/false, got {value!r}")
                object.__setattr__(self, name, low in _TRUE)
            elif not isinstance(value, bool):
                object.__setattr__(self, name, bool(value))
        for name in ("history_length", "similarity_max_comparisons"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if self.mode not in ("mean_std_norm", "mean_norm"):
            raise ValueError(f"mode must be 'mean_std_norm' or 'mean_norm', got {self.mode!r}")
        if self.episode_stats not in ("steps", "trajectories"):
            raise ValueError(f"episode_stats must be 'steps' or 'trajectories', got {self.episode_stats!r}")
        if self.singleton_rule not in ("auto", "zero", "group"):
            raise ValueError(f"singleton_rule must be 'auto', 'zero' or 'group', got {self.singleton_rule!r}")
        if self.center not in ("none", "group", "batch"):
            raise ValueError(f"center must be 'none', 'group' or 'batch', got {self.center!r}")
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {self.dtype!r}")
        for name in ("gamma", "invalid_penalty", "eps", "omega", "lambda0", "alpha", "alpha_c", "fixed_lambda",
                     "length_weight_alpha", "similarity_threshold", "empg_k", "empg_k_future", "empg_zeta"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.eps < 0.0:
            raise ValueError(f"eps must be >= 0, got {self.eps}")
        if not 0.0 < self.similarity_threshold < 1.0:
            raise ValueError(f"similarity_threshold must be in (0, 1), got {self.similarity_threshold}")
        if not 0.0 <= self.fixed_lambda <= 1.0:
            raise ValueError(f"fixed_lambda must be in [0, 1], got {self.fixed_lambda}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.dtype]

    def resolve_singleton_rule(self, estimator_default: str) -> str:
        """The singleton rule in force: the configured one, or the estimator's default when 'auto'."""
        return estimator_default if self.singleton_rule == "auto" else self.singleton_rule

    def replace(self, **changes) -> "AdvantageConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name -> help text, for building CLI options."""
        return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}
