"""Background threads run at a lower scheduling priority than requests."""

from __future__ import annotations

import contextlib
import os
import threading

# Background work (embedding memories after a compile) yields the CPU to requests: on a busy
# machine a request never waits behind it, and on an idle one it still gets every spare cycle.
NICE = 10


def lower_priority() -> None:
    """Lower the calling thread's scheduling priority by ``NICE`` (Linux, where a thread has its
    own nice value; elsewhere nothing happens)."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
