"""The HTTP API: one router module per resource, the error shape, auth and middleware."""
