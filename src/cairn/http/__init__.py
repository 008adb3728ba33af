"""What the HTTP API (``cairn.api``) and the web inspector (``cairn.web``) share: API-key auth
and the tenant of a request, validation details, response headers, and the runtimes a request
runs on. Both faces import this package, never each other; ``cairn.app`` assembles them."""
