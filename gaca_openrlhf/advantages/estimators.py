"""The registered estimators (docs/design.md §3 rule 7; HGPO and EMPG as their public definitions, §3.1-3.2). Each is a
pure function of the batch and the config.

Notation: A^E = episode advantage (rule 3), A^S = step (anchor-state) advantage (rule 4), c = criticality (rule 5),
lambda = gate (rule 6). GACA = arXiv 2609.12424; GiGPO = arXiv 2505.10978 (its Eq. 3 / 7 / 8 are A^E / A^S / A).
"""

from __future__ import annotations

import torch

from .batch import AdvantageResult
from .config import AdvantageConfig
from .context import StepContext
from .hgpo import history_group_advantage
from .registry import register_estimator
from .segment import flat_segments, normalize


@register_estimator("grpo")
def grpo(ctx: StepContext, cfg: AdvantageConfig) -> AdvantageResult:
    """GRPO in step-sample form: A = A^E (every step gets its group-normalized episode score).

    A^S (GiGPO's, singletons 0) is still reported for logging; it does not enter the advantage.
    """
    return ctx.result(advantage=ctx.episode_advantage, step_advantage=ctx.step_advantage(cfg.resolve_singleton_rule("zero")))


@register_estimator("gigpo")
def gigpo(ctx: StepContext, cfg: AdvantageConfig) -> AdvantageResult:
    """GiGPO (Eq. 8): A = A^E + omega A^S; a singleton anchor group has A^S = 0."""
    a_s = ctx.step_advantage(cfg.resolve_singleton_rule("zero"))
    return ctx.result(advantage=ctx.episode_advantage + cfg.omega * a_s, step_advantage=a_s)


@register_estimator("fixed_mixture", mixture=True)
def fixed_mixture(ctx: StepContext, cfg: AdvantageConfig) -> AdvantageResult:
    """Ablation: A = (1 - lambda) A^E + lambda A^S with one constant lambda = fixed_lambda (0: episode only, 1: step only).

    A^S uses GiGPO's singleton rule (0), as the shared reference vectors do; with ``singleton_rule="group"`` and
    lambda = 0.75 it equals GACA whenever every criticality is 1 (e.g. NLL constant within each trajectory).
    """
    a_s = ctx.step_advantage(cfg.resolve_singleton_rule("zero"))
    lam = torch.full_like(a_s, cfg.fixed_lambda)
    return ctx.result(advantage=(1.0 - lam) * ctx.episode_advantage + lam * a_s, step_advantage=a_s, lambda_=lam)


def _gaca(ctx: StepContext, cfg: AdvantageConfig, permute: bool) -> AdvantageResult:
    a_s = ctx.step_advantage(cfg.resolve_singleton_rule("group"))  # rule 4, GACA singleton fallback
    c = ctx.criticality(permute=permute)  # rule 5 (+ permutation / NLL-share ablations)
    lam = ctx.gate(c)  # rule 6
    advantage = (1.0 - lam) * ctx.episode_advantage + lam * a_s  # rule 7: per-step convex mixture
    return ctx.result(advantage=advantage, step_advantage=a_s, criticality=c, lambda_=lam)


@register_estimator("gaca", mixture=True, needs_nll=True)
def gaca(ctx: StepContext, cfg: AdvantageConfig) -> AdvantageResult:
    """GACA: A_i = (1 - lambda_i) A^E_i + lambda_i A^S_i, lambda_i = clip(lambda0 (1 + alpha c_i), 0, 1).

    A step the policy found surprising (high NLL relative to its trajectory, c > 1) leans on the fine-grained step
    advantage; a routine step leans on the episode outcome. ``alpha_c < 1`` gives the NLL-share ablation.
    """
    return _gaca(ctx, cfg, permute=False)


@register_estimator("gaca_permuted", mixture=True, needs_nll=True)
def gaca_permuted(ctx: StepContext, cfg: AdvantageConfig) -> AdvantageResult:
    """Ablation: GACA with each trajectory's criticalities permuted among its steps (seed ``permutation_seed``).

    Keeps the per-trajectory distribution of lambda but breaks its link to the step -- the paper's control for
    whether *which* step gets the step advantage matters.
    """
    return _gaca(ctx, cfg, permute=True)


def _hgpo_base(ctx: StepContext, cfg: AdvantageConfig) -> torch.Tensor:
    """HGPO's k = 0 item: A^E with statistics over all step samples of the group, as the public code fixes it
    (``compute_mean_std_cross_steps=True``) whatever ``episode_stats`` says."""
    g, n_g = ctx.group
    if cfg.episode_stats == "steps":
        base = ctx.episode_advantage
    else:
        base = normalize(ctx.episode_score, g, n_g, cfg.mode, cfg.eps, singleton="unit")[0]
    # a group whose step samples all have the same score has no base item: exactly 0 (HGPO counts non-zero items, so
    # the rounding noise of x - mean must not make one), as a flat history group
    count = torch.bincount(g, minlength=n_g)
    flat = flat_segments(ctx.episode_score, g, n_g, count) & (count > 1)  # a singleton keeps its "unit" item
    return torch.where(flat[g], torch.zeros_like(base), base)


@register_estimator("hgpo")
def hgpo(ctx: StepContext, cfg: AdvantageConfig) -> AdvantageResult:
    """HGPO (verl-agent ``recipe/hgpo``): weighted mean of the step's non-zero history-group advantages.

    History group of length k = steps of the same task group whose last k anchors (within their trajectory) are
    identical, k = 1 .. history_length + 1; returns normalized with the population std; weights (k + 1)^alpha
    (alpha = ``length_weight_alpha``); with ``base_group`` the episode advantage A^E is a k = 0 item. The rules
    and their cost are in :mod:`.hgpo`. ``step_advantage`` reports the history-group part alone.
    """
    g, n_g = ctx.group
    tr, _ = ctx.traj
    sg, n_sg, _ = ctx.step_group
    advantage, hist = history_group_advantage(
        g, n_g, tr, ctx.order, ctx.traj_sizes, sg, n_sg, ctx.step_return,
        cfg.history_length, cfg.length_weight_alpha, cfg.mode, cfg.eps,
        base=_hgpo_base(ctx, cfg) if cfg.base_group else None,
    )
    return ctx.result(advantage=advantage, step_advantage=hist)


#: EMPG's own epsilon in the min-max normalization and the g(H) mean (project page pseudocode: 1e-8)
EMPG_EPS = 1e-8


@register_estimator("empg", needs_entropy=True)
def empg(ctx: StepContext, cfg: AdvantageConfig) -> AdvantageResult:
    """EMPG (Entropy-Modulated Policy Gradients, arXiv 2509.09265) on top of the GRPO episode advantage A^E.

    With H_t = the step's mean token entropy under pi_old (``StepBatch.entropy``), over the whole batch:
      - Eq. 12 (batch min-max normalization): H~ = (H - min H) / (max H - min H + 1e-8);
      - Eq. 10 (self-calibrating gradient scaling): g(H~) = exp(-k H~) / (mean_batch exp(-k H~) + 1e-8);
      - Eq. 11 (future clarity bonus): f(H~) = exp(-k' H~);
      - modulated advantage: A_mod,t = g(H~_t) A^E_t + zeta f(H~_{t+1}), the bonus only where the trajectory has a
        next step (none on its last step);
      - final advantage normalization: A = A_mod - mean_batch(A_mod) (``empg_zero_mean``; zero mean, no std).
    Equation numbers follow the paper's project-page pseudocode (``compute_empg_advantage``); k = ``empg_k``,
    k' = ``empg_k_future``, zeta = ``empg_zeta`` (defaults 1, 1, 0.1). ``step_advantage`` reports A_mod - g A^E
    (the bonus) and ``entropy`` the H_t it used.
    """
    h = ctx.batch.entropy
    h_norm = (h - h.min()) / (h.max() - h.min() + EMPG_EPS)
    scale_raw = torch.exp(-cfg.empg_k * h_norm)
    scale = scale_raw / (scale_raw.mean() + EMPG_EPS)
    clarity = torch.exp(-cfg.empg_k_future * h_norm)
    # next step of the same trajectory: the following element in (trajectory, t) order, if it is the same trajectory
    order = ctx.order
    tr, _ = ctx.traj
    tr_s = tr[order]
    has_next_s = torch.zeros(ctx.n, dtype=torch.bool)
    has_next_s[:-1] = tr_s[1:] == tr_s[:-1]
    next_clarity_s = torch.zeros(ctx.n, dtype=h.dtype)
    next_clarity_s[:-1] = clarity[order][1:]
    bonus_s = torch.where(has_next_s, cfg.empg_zeta * next_clarity_s, torch.zeros_like(next_clarity_s))
    bonus = torch.empty_like(bonus_s).index_copy_(0, order, bonus_s)
    modulated = scale * ctx.episode_advantage + bonus
    advantage = modulated - modulated.mean() if cfg.empg_zero_mean else modulated
    return ctx.result(advantage=advantage, step_advantage=bonus)
