"""Committed run records (``results/``) and the README tables rendered from them.

Every number the README states about a CPU run comes from a small folder under ``results/`` that this module wrote
from a quickstart output folder and can read back without it:

    results/<name>/record.json                 what ran: command, commit, CPU, date, setting, seeds, runs, wall times
    results/<name>/episodes/<label>/<panel>.jsonl   one line per evaluation episode (task, seed, won, steps, ...)
    results/<name>/metrics/<label>.jsonl       the RL run's metrics.jsonl (one record per iteration)

``<label>`` is ``warm_start`` or ``<method>_seed<training seed>``; ``<panel>`` is ``test`` (valid_seen),
``test_unseen`` (valid_unseen), ``val`` (the validation panel, final model) or ``val_step<N>`` (the validation panel
after N RL iterations: the learning curve).

    python -m gaca_openrlhf.bench.records collect OUT_DIR results/NAME --what "one line"
    python -m gaca_openrlhf.bench.records merge results/NAME results/NAME/part1 results/NAME/part2 ...
    python -m gaca_openrlhf.bench.records render [--write]   # README tables from results/ (--write: update README)

``render`` replaces the text between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->`` in README.md with the
table of ``results/NAME``; without ``--write`` it exits 1 when the README disagrees (tests/gaca_openrlhf/bench/
test_records.py runs it). ``<!-- audit:NAME -->`` blocks get a committed credit audit's ``audit.md``.
``<!-- choice:KEY:NAME1,NAME2 -->`` blocks get the choice of setting KEY on the
validation panel among those records (:mod:`.choice`); ``<!-- chosen:KEY:NAME1,NAME2 -->`` blocks the compare with
each method at its chosen value (:func:`render_chosen`). Games are paired by their identity (task folder/trial), not
by where a machine keeps its data. Intervals: :mod:`gaca_openrlhf.report.stats` (crossed bootstrap over training seeds and
test games, fixed bootstrap seed, so the same records always render the same text).

One module a job: ``files`` (what a record folder holds, its readers), ``machine`` (the CPU and dtypes named beside
every number), ``collect`` (collect, merge), ``tables`` (a record read back as tables and targets), ``plot``
(curves.png), ``readme`` (the marked blocks), ``cli``.
"""
from .collect import collect, merge
from .files import EPISODE_KEYS, METHOD_ORDER, PANELS, ROOT, _order
from .machine import cpu_model, machine_line, simd_label
from .plot import plot_record
from .readme import AUDIT_MARK, CHOICE_MARK, CHOSEN_MARK, MARK, render_audit, render_readme
from .tables import (_table_lines, plain_command_differs, render_chosen, render_record, setting_line, target_lines,
                     val_curve_lines)
from .cli import main

__all__ = ["collect", "merge", "EPISODE_KEYS", "METHOD_ORDER", "PANELS", "ROOT", "_order", "cpu_model", "machine_line",
           "simd_label", "plot_record", "AUDIT_MARK", "CHOICE_MARK", "CHOSEN_MARK", "MARK", "render_audit",
           "render_readme", "_table_lines", "plain_command_differs", "render_chosen", "render_record", "setting_line",
           "target_lines", "val_curve_lines", "main"]
