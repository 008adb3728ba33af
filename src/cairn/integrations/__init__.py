"""Adapters that plug Cairn into agent frameworks, each a thin layer over ``cairn.client``.

- ``cairn.integrations.openai_agents``: ``CairnSession`` (the OpenAI Agents SDK's ``Session``)
  and the ``cairn_recall`` function tool; needs ``pip install 'cairn[openai-agents]'``.
- ``cairn.integrations.langchain``: ``CairnRetriever`` and ``CairnChatMessageHistory``; needs
  ``pip install 'cairn[langchain]'``.
- ``cairn.integrations.langgraph``: ``CairnStore``, a LangGraph ``BaseStore``; needs
  ``pip install 'cairn[langgraph]'``.

Each module imports its framework on import and says which extra to install when it is missing.
"""
