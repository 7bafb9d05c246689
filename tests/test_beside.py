"""Work beside an answer (router/beside.py): bounded threads that never hold the process."""

import threading

import pytest

from router.beside import Beside


def test_work_runs_beside_its_errors_reach_the_future_and_close_cancels_the_rest():
    beside = Beside(workers=1)
    release = threading.Event()
    busy = beside.submit(release.wait, 10)
    waiting = beside.submit(lambda: "never run")
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("beside"))
    beside.close()
    assert waiting.cancelled() and beside.submit(lambda: 1).cancelled()
    release.set()
    assert busy.result(5) is True
    failing = Beside(workers=2)
    with pytest.raises(ZeroDivisionError):
        failing.submit(lambda: 1 / 0).result(5)
    assert [failing.submit(lambda n=n: n * 2).result(5) for n in range(5)] == [0, 2, 4, 6, 8]
    failing.close()
