"""Quick re-check of surviving mutants against a few test files, after new tests were written for them.

    python scripts/mutation_recheck.py gaca_openrlhf/trainer/samples.py tests/gaca_openrlhf/trainer/test_samples_edges.py

``mutmut run NAME...`` re-tests mutants properly (a fresh forked pytest per mutant, all the tests that cover the
mutated function) but costs ~1-10 s per mutant on a shared 2-core machine. This script runs the given test files
once per surviving mutant of the given source file *in one process* (pytest.main with mutmut's
``MUTANT_UNDER_TEST`` switch, inside ``mutants/`` after a ``bash scripts/mutation.sh`` run), ~0.2 s per mutant, and
prints which ones the tests now kill. Module state can leak between the in-process runs, so treat its answer as a
pre-check and confirm with ``mutmut run NAME...`` (the counts in tests/MUTATION_SURVIVORS.md say which was used).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def survivors(source: str) -> list[str]:
    from mutmut.stats import status_by_exit_code

    meta = json.load(open(os.path.join(ROOT, "mutants", source + ".meta")))
    return [k for k, v in meta["exit_code_by_key"].items()
            if v is not None and status_by_exit_code.get(v) in ("survived", "no tests")]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    source, tests = argv[0], argv[1:]
    if not os.path.isdir(os.path.join(ROOT, "mutants")):
        print("no mutants/ folder: run bash scripts/mutation.sh first", file=sys.stderr)
        return 2
    names = survivors(source)
    os.chdir(os.path.join(ROOT, "mutants"))
    for t in tests:  # the newest version of the test files
        shutil.copy2(os.path.join(ROOT, t), t)
    sys.path.insert(0, os.getcwd())
    import pytest

    killed = []
    for name in [""] + names:  # "" = no mutant: the tests must pass
        os.environ["MUTANT_UNDER_TEST"] = name
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(out):
            rc = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-W", "ignore", *tests])
        if not name:
            if rc:
                print(out.getvalue()[-3000:])
                print("the tests fail without a mutant", file=sys.stderr)
                return 1
            continue
        print(("killed   " if rc else "survived ") + name, flush=True)
        killed += [name] if rc else []
    print(f"{source}: {len(names)} survivors re-checked, {len(killed)} now killed, {len(names) - len(killed)} survive")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
