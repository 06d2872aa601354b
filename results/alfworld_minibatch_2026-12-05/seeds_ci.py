"""Paired gain over training seeds x games: python seeds_ci.py WARM.json RUN1.json RUN2.json ... (val4 eval files)."""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root
from gaca_openrlhf.report.stats import difference, success_matrix

def eps(p):
    d = json.load(open(p))
    return [{"task": "/".join(e["task"].rstrip("/").split("/")[-2:]), "won": bool(e["won"]) and not e.get("failed")}
            for e in d["episodes"]]

warm = eps(sys.argv[1]); runs = [eps(p) for p in sys.argv[2:]]
w, games = success_matrix({0: warm})
m, _ = success_matrix({i: r for i, r in enumerate(runs)}, games)
iv = difference(m, w, n_boot=10000)
per_seed = [float(row.mean() - w.mean()) for row in m]
print(f"seeds {len(runs)} games {len(games)}: warm {100*w.mean():.1f} -> {100*m.mean():.1f} %, gain {100*iv.mean:+.1f} "
      f"[{100*iv.lo:+.1f}, {100*iv.hi:+.1f}]; per seed " + ", ".join(f"{100*x:+.1f}" for x in per_seed))
