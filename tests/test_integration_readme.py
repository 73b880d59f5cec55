"""The README's framework snippets run as written (each in a fresh directory and process).

The OpenAI Agents SDK snippet needs an OpenAI model, so it is not run here;
tests/test_integration_agents.py runs the same calls with a scripted model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server_support import REPO

SECTION = re.search(r"^## Agent frameworks\n(.*?)^## ", (REPO / "README.md").read_text(), re.S | re.M)
SNIPPETS = re.findall(r"```python\n(.*?)```", SECTION.group(1) if SECTION else "", re.S)
EXPECT = {
    "memlane.integrations.langchain": "On Friday.",
    "memlane.integrations.langgraph": "heard 3 messages",
    "memlane.integrations.llamaindex": "2",
    "memlane.integrations.pydantic_ai": "2",
}
#: the framework each snippet needs (an extra `make test` installs); our own module must import
FRAMEWORK = {
    "memlane.integrations.langchain": "langchain_core",
    "memlane.integrations.langgraph": "langgraph",
    "memlane.integrations.llamaindex": "llama_index.core",
    "memlane.integrations.pydantic_ai": "pydantic_ai",
}


def test_every_framework_has_a_snippet() -> None:
    joined = "\n".join(SNIPPETS)
    assert all(module in joined for module in [*EXPECT, "memlane.integrations.openai_agents"])


@pytest.mark.parametrize("module", sorted(EXPECT))
def test_snippet_runs(module: str, tmp_path: Path) -> None:
    (code,) = [s for s in SNIPPETS if module in s]
    pytest.importorskip(FRAMEWORK[module], reason="make test installs the integration extras")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert EXPECT[module] in done.stdout, done.stdout
