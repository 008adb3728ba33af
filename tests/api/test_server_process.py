"""Process-wide settings of a server process: the interpreter's switch interval and glibc's
malloc tuning and heap trimming (``cairn.app.prepare_server_process``)."""

from __future__ import annotations

import ctypes.util
import platform
import sys

import pytest

from cairn.app import SERVER_SWITCH_INTERVAL_S, prepare_server_process, tune_malloc


def test_prepare_server_process_sets_the_switch_interval() -> None:
    before = sys.getswitchinterval()
    try:
        prepare_server_process()
        assert sys.getswitchinterval() == pytest.approx(SERVER_SWITCH_INTERVAL_S)
    finally:
        sys.setswitchinterval(before)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt is glibc's",
)
def test_malloc_is_tuned_on_glibc() -> None:
    assert ctypes.util.find_library("c")
    assert tune_malloc() is True


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim is glibc's",
)
def test_a_server_process_trims_its_heap_in_the_background() -> None:
    import threading

    from cairn.app import start_heap_trimmer

    before = sys.getswitchinterval()
    try:
        prepare_server_process()
    finally:
        sys.setswitchinterval(before)
    trimmer = start_heap_trimmer()
    assert trimmer is not None and trimmer.is_alive() and trimmer.daemon
    assert start_heap_trimmer() is trimmer  # once per process
    assert [t for t in threading.enumerate() if t.name == "cairn-heap-trim"] == [trimmer]
