"""ASGI entry point for process managers: ``uvicorn cairn.asgi:app`` (settings from env).

``cairn serve --workers N`` starts its processes through this module too, so each one sets up
logging from the same settings as the parent.
"""

import ctypes
import ctypes.util
import os
import signal
import sys

from cairn.app import create_app, prepare_server_process, settle_server_heap
from cairn.config import Settings
from cairn.logs import configure_logging

# Set by ``cairn serve --workers N`` to its own pid: the processes it starts stop with it.
PARENT_ENV = "CAIRN_SERVE_PARENT"
_PR_SET_PDEATHSIG = 1


def stop_with_parent() -> bool:
    """In a process of ``cairn serve --workers N``, ask Linux for SIGTERM when that command's
    process dies, however it dies (``kill -9`` included): its processes would otherwise go on
    serving the port with nobody to stop them, and a new ``cairn serve`` could not bind it.
    Not in a process started some other way (``uvicorn cairn.asgi:app``). Returns whether
    it was asked."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or parent != str(os.getppid()) or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return False
    if str(os.getppid()) != parent:  # it died before the request: stop now
        os.kill(os.getpid(), signal.SIGTERM)
    return True


stop_with_parent()
settings = Settings()
prepare_server_process()
configure_logging(settings.log_level, json_lines=settings.log_json)
app = create_app(settings)
settle_server_heap()
