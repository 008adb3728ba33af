"""Process-wide settings of a server process: the interpreter's switch interval and glibc's
malloc tuning (``cairn.app.prepare_server_process``)."""

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
