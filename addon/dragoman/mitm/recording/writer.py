"""``RecordWriter``: the Recorder's one background thread. Serialising and writing an exchange (a long stream
is tens of MiB of JSON) never runs on mitmproxy's event loop, so other flows are not held up while it is
written; jobs run in the order they were submitted.

A job that fails with ``OSError`` is reported by ``on_error`` on the event loop that submitted it (where it
can stop mitmdump as mitmproxy's own ``save.py`` does); without a running loop (tests), ``wait()`` reports it.

After each job the thread hands the memory it freed back to the system (``malloc_trim``): glibc gives a
thread its own malloc arena and, once any block above 128 KiB has been freed, keeps up to twice that size
of free memory in each arena; the writer's arena so held 4-5 MiB after a long stream's exchange
(peak RSS growth of ``make bench-record`` 13.4-16.6 MiB without the trim, 13.9-14.4 MiB with it).
Elsewhere than glibc, nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import queue
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

Job = Callable[[], None]


def _libc_trim() -> Callable[[], object]:
    """glibc's ``malloc_trim(0)`` (ctypes releases the GIL around it), or a no-op where there is none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


malloc_trim = _libc_trim()


class RecordWriter:
    def __init__(self, on_error: Callable[[OSError], None], trim: Callable[[], object] = malloc_trim) -> None:
        self.on_error = on_error
        self.trim = trim
        self._jobs: queue.Queue[tuple[Job, asyncio.AbstractEventLoop | None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._failed: OSError | None = None
        self._lock = threading.Lock()

    def submit(self, job: Job) -> None:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dragoman-recorder", daemon=True)
                self._thread.start()
        self._jobs.put((job, loop))

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            try:
                if item is None:
                    return
                job, loop = item
                try:
                    job()
                except OSError as e:
                    if loop is not None and not loop.is_closed():
                        loop.call_soon_threadsafe(self.on_error, e)
                    else:
                        self._failed = e
                except Exception:  # noqa: BLE001 - a recorder bug must not end the thread
                    logger.exception("recording an exchange failed")
                self.trim()
            finally:
                self._jobs.task_done()

    def wait(self) -> None:
        """Until every submitted job has run; reports a failure that had no event loop to go to."""
        self._jobs.join()
        failed, self._failed = self._failed, None
        if failed is not None:
            self.on_error(failed)

    def close(self) -> None:
        """Finish the queued jobs, then stop the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._jobs.put(None)
            thread.join()
        failed, self._failed = self._failed, None
        if failed is not None:
            self.on_error(failed)
