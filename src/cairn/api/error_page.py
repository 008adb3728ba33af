"""The inspector's error page for a request refused before any route (its bytes, its size):
a plain page with the inspector's stylesheet, as its routes' errors are pages, not JSON."""

from __future__ import annotations

import html

from starlette.types import Send


def is_page(path: str) -> bool:
    """Whether ``path`` is an inspector page (``/ui``, not its static files)."""
    return (path == "/ui" or path.startswith("/ui/")) and not path.startswith("/ui/static/")


async def send_page(send: Send, status: int, code: str, message: str) -> None:
    """A plain error page of the inspector (its stylesheet, no script; text escaped)."""
    body = _PAGE.format(
        status=status, code=html.escape(code), message=html.escape(message)
    ).encode()
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Error {status} · Cairn inspector</title>
  <link rel="stylesheet" href="/ui/static/cairn.css">
</head>
<body>
<main id="main">
<h1>Invalid request</h1>
<div class="alert error" role="alert">
  <p data-testid="error-message">{message}</p>
  <p class="muted">Error code <code data-testid="error-code">{code}</code> · HTTP {status}</p>
</div>
<p><a href="/ui">Back to the inspector</a></p>
</main>
</body>
</html>
"""
