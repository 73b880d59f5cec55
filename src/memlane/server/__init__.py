"""memlane over the network: REST (FastAPI), MCP, the web inspector, the chat REPL.

``create_app(mem)`` in :mod:`memlane.server.app` builds the ASGI app; ``memlane serve``
runs it. Tenant isolation lives in :mod:`memlane.server.tenancy`, the HTTP status of
every library error in :mod:`memlane.server.errors`, API keys in :mod:`memlane.server.auth`.
This package needs the ``server`` extra (fastapi, uvicorn, mcp, prometheus-client).
"""
