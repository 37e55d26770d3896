"""RecordWriter: jobs run in order on one thread, failures reported, and the thread's freed memory handed back
to the system after every job (``malloc_trim``)."""

from __future__ import annotations

import platform
import threading

from dragoman.mitm.recording import writer as record_writer
from dragoman.mitm.recording.writer import RecordWriter


def test_jobs_run_in_order_on_one_thread_and_each_is_followed_by_a_trim():
    events: list[str] = []
    threads: set[int] = set()

    def job(n: int):
        def run() -> None:
            threads.add(threading.get_ident())
            events.append(f"job{n}")

        return run

    w = RecordWriter(on_error=lambda e: events.append(f"error {e}"), trim=lambda: events.append("trim"))
    for n in range(3):
        w.submit(job(n))
    w.wait()
    assert events == ["job0", "trim", "job1", "trim", "job2", "trim"]
    assert len(threads) == 1 and threading.get_ident() not in threads
    w.close()


def test_a_failing_job_is_reported_and_still_trimmed_and_the_thread_goes_on():
    events: list[str] = []
    w = RecordWriter(on_error=lambda e: events.append(f"error {e}"), trim=lambda: events.append("trim"))

    def fails() -> None:
        raise OSError("disk full")

    def broken() -> None:
        raise ValueError("recorder bug")

    w.submit(fails)
    w.submit(broken)
    w.submit(lambda: events.append("after"))
    w.wait()
    assert events == ["trim", "trim", "after", "trim", "error disk full"]
    w.close()


def test_malloc_trim_is_glibcs_where_there_is_glibc():
    result = record_writer.malloc_trim()
    if platform.libc_ver()[0] == "glibc":
        assert result in (0, 1)  # the real call: 1 when memory went back to the system
    else:
        assert result is None  # the no-op
