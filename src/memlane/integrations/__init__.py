"""memlane inside agent frameworks, one module per framework, each in its own extra.

- ``memlane.integrations.openai_agents``: an Agents SDK ``Session`` (``memlane[agents]``)
- ``memlane.integrations.langgraph``: a checkpointer and a ``BaseStore`` (``memlane[langgraph]``)
- ``memlane.integrations.langchain``: a ``BaseChatMessageHistory`` (``memlane[langchain]``)
- ``memlane.integrations.llamaindex``: a ``BaseChatStore`` (``memlane[llamaindex]``)
- ``memlane.integrations.pydantic_ai``: message conversions and a history processor
  (``memlane[pydantic-ai]``)

These are edges: they take a :class:`~memlane.Memory` (or :class:`~memlane.aio.AsyncMemory`)
and speak the framework's types; the framework's items are stored verbatim (memlane.items).
"""
