"""Print the server's OpenAPI document: ``python -m memlane.server.openapi > docs/openapi.json``.

The document depends only on the code, never on the data or the auth mode, so
the copy in the repository can be checked against the app by a test.
"""

from __future__ import annotations

import json


def spec_text() -> str:
    from memlane.memory import Memory
    from memlane.server.app import create_app

    with Memory("memory://", embedder="none") as mem:
        app = create_app(mem, mcp=False)
        return json.dumps(app.openapi(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(spec_text(), end="")
