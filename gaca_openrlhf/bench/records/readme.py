"""The README's marked blocks, each replaced by what its committed record renders to (``results:``, ``choice:``,
``chosen:``, ``audit:``)."""
from __future__ import annotations

import re
from pathlib import Path

from .files import _order
from .tables import render_chosen, render_record


MARK = re.compile(r"(<!-- results:([\w.-]+) -->\n)(.*?)(<!-- /results:\2 -->)", re.S)
#: a setting chosen on the validation panel among records (:mod:`.choice`): ``<!-- choice:KEY:NAME1,NAME2 -->``
CHOICE_MARK = re.compile(r"(<!-- choice:(\w+):([\w.,-]+) -->\n)(.*?)(<!-- /choice:\2 -->)", re.S)
#: the compare at each method's chosen setting (:func:`render_chosen`): ``<!-- chosen:KEY:NAME1,NAME2 -->``
CHOSEN_MARK = re.compile(r"(<!-- chosen:(\w+):([\w.,-]+) -->\n)(.*?)(<!-- /chosen:\2 -->)", re.S)


#: a committed credit audit (``python -m gaca_openrlhf.diagnostics.audit_command --out results/NAME``): its own
#: ``audit.md``, written from its ``audit.json``: ``<!-- audit:NAME -->``
AUDIT_MARK = re.compile(r"(<!-- audit:([\w./-]+) -->\n)(.*?)(<!-- /audit:\2 -->)", re.S)


def render_audit(rec_dir: Path) -> str:
    """The README section of a committed audit: its ``audit.md`` (heading levels lowered under the README's)."""
    if not (rec_dir / "audit.json").is_file() or not (rec_dir / "audit.md").is_file():
        raise FileNotFoundError(f"README cites the audit {rec_dir}, which has no audit.json + audit.md")
    lines = (rec_dir / "audit.md").read_text().strip().splitlines()
    return "\n".join("###" + ln if ln.startswith("#") else ln for ln in lines)


def render_readme(text: str, results: Path) -> str:
    """``text`` with every marked block replaced by its record's table (and every choice block by its choice, every
    audit block by its audit's markdown)."""
    def sub(m: re.Match) -> str:
        rec_dir = results / m.group(2)
        if not (rec_dir / "record.json").is_file():
            raise FileNotFoundError(f"README cites results/{m.group(2)}, which has no record.json")
        return m.group(1) + render_record(rec_dir) + "\n" + m.group(4)

    def sub_choice(m: re.Match) -> str:
        from ..choice import render_choice

        table = render_choice(results, m.group(3).split(","), m.group(2), order=_order)
        return m.group(1) + table + "\n" + m.group(5)

    def sub_chosen(m: re.Match) -> str:
        return m.group(1) + render_chosen(results, m.group(3).split(","), m.group(2)) + "\n" + m.group(5)

    def sub_audit(m: re.Match) -> str:
        return m.group(1) + render_audit(results / m.group(2)) + "\n" + m.group(4)

    text = AUDIT_MARK.sub(sub_audit, text)
    return CHOSEN_MARK.sub(sub_chosen, CHOICE_MARK.sub(sub_choice, MARK.sub(sub, text)))
