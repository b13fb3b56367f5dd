"""The engine behind an OpenAI-compatible HTTP API, and the client side of any such API."""
