"""``trainer/progress.py``: the phases the trainer publishes for the driver's stall watch, and reading them back.

The store is a dict standing in for Ray's internal key-value store; the real store (GCS) between an actor and the
driver is checked with real Ray actors in test_startup_failure.py (slow)."""
from __future__ import annotations

import json

import pytest

from gaca_openrlhf.trainer.progress import Mark, NoProgress, ProgressReporter, progress_key, read_progress


class Store(dict):
    def put(self, key, value, overwrite=False):
        assert overwrite, "each mark must replace the previous one"
        self[key] = value


def test_marks_are_published_in_order_with_their_iteration():
    """Bug caught: the sequence number not advancing (a phase entered twice would look stuck), the iteration of the
    previous mark not carried by a mark without one, or the key not the run's."""
    store = Store()
    rep = ProgressReporter(progress_key("abc"), put=store.put, clock=lambda: 12.5)
    rep.mark("rollout", 4)
    assert read_progress("gaca/progress/abc", get=store.get) == Mark("rollout", 4, 1, 12.5)
    rep.mark("sync")
    rep.mark("sync")
    assert read_progress("gaca/progress/abc", get=store.get) == Mark("sync", 4, 3, 12.5)
    assert json.loads(store[b"gaca/progress/abc"])["seq"] == 3
    assert read_progress("gaca/progress/other", get=store.get) is None


def test_unknown_phase_is_an_error_and_a_failed_publish_is_not():
    """Bug caught: a typo in a phase name published silently, or a store error (GCS briefly unreachable) raised
    into the training loop."""
    rep = ProgressReporter("k", put=Store().put)
    with pytest.raises(ValueError, match="unknown phase 'train'"):
        rep.mark("train", 1)

    def broken(*a, **kw):
        raise ConnectionError("GCS unreachable")

    ProgressReporter("k", put=broken).mark("training", 1)  # no error
    assert read_progress("k", get=lambda key: (_ for _ in ()).throw(ConnectionError("x"))) is None
    NoProgress().mark("rollout", 1)


def test_describe_names_phase_and_iteration():
    assert Mark("resume_sync", 2, 1, 0.0).describe() == "the resume sync phase of iteration 2"
    assert Mark("start", 0, 1, 0.0).describe() == "the start of fit"
