"""``python -m gaca_openrlhf.bench.records collect|merge|render``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __doc__ as PACKAGE_DOC
from .collect import collect, merge
from .files import ROOT
from .plot import plot_record
from .readme import MARK, render_readme
from .tables import render_record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.bench.records", description=PACKAGE_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="copy a quickstart output folder's records into results/NAME")
    c.add_argument("out_dir")
    c.add_argument("dest")
    c.add_argument("--what", default="")
    m = sub.add_parser("merge", help="one record of several parts of one setting (one training seed each, ...)")
    m.add_argument("dest")
    m.add_argument("sources", nargs="+")
    m.add_argument("--what", default="")
    r = sub.add_parser("render", help="README tables from results/ (exit 1 when they disagree, unless --write)")
    r.add_argument("--write", action="store_true")
    r.add_argument("--readme", default=str(ROOT / "README.md"))
    r.add_argument("--results", default=str(ROOT / "results"))
    r.add_argument("--show", default=None, metavar="NAME", help="print one record's table")
    args = p.parse_args(argv)
    if args.cmd == "collect":
        rec = collect(args.out_dir, args.dest, args.what)
        print(f"collected {len(rec['runs'])} labels into {args.dest}")
        return 0
    if args.cmd == "merge":
        try:
            rec = merge(args.sources, args.dest, args.what)
        except (ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"merged {len(args.sources)} records ({len(rec['runs'])} labels) into {args.dest}")
        return 0
    if args.show:
        print(render_record(Path(args.results) / args.show))
        return 0
    readme = Path(args.readme)
    old = readme.read_text()
    new = render_readme(old, Path(args.results))
    if new == old:
        print("README tables agree with results/")
        return 0
    if args.write:
        for name in MARK.findall(old):
            plot_record(Path(args.results) / name[1])
        readme.write_text(new)
        print(f"updated {readme}")
        return 0
    print("README tables disagree with results/: run `python -m gaca_openrlhf.bench.records render --write`",
          file=sys.stderr)
    return 1
