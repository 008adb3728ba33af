"""ASGI entry point for process managers: ``uvicorn cairn.asgi:app`` (settings from env).

``cairn serve --workers N`` starts its processes through this module too, so each one sets up
logging from the same settings as the parent.
"""

from cairn.app import create_app, prepare_server_process, settle_server_heap, stop_with_parent
from cairn.config import Settings
from cairn.logs import configure_logging

stop_with_parent()
settings = Settings()
prepare_server_process()
configure_logging(settings.log_level, json_lines=settings.log_json)
app = create_app(settings)
settle_server_heap()
