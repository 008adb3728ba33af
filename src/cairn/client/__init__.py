"""The Cairn Python SDK: typed sync and async clients of the HTTP API.

    from cairn.client import Cairn
    with Cairn("http://127.0.0.1:8100", api_key="ck_...") as cairn:
        cairn.episodes.create("user-1", source="chat", type="message", payload={"text": "hi"})

``Cairn.local()`` / ``AsyncCairn.local()`` run the same app in-process on the configured
database. Errors are ``APIError`` subclasses carrying ``code``, ``status`` and ``request_id``.
"""

from cairn.client._client import AsyncCairn, Cairn
from cairn.client._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    CairnClientError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    ServerError,
    UnexpectedResponseError,
)
from cairn.client._feature_models import (
    Budget,
    ChatChunk,
    ChatCompletion,
    CompileJob,
    CompileJobQueued,
    CompileResult,
    ContextBundle,
    ContextItem,
    DocumentCommit,
    DocumentDeleted,
    MemoryTemplate,
    Message,
    ModelList,
    Run,
    RunList,
    Scope,
    ScopeContext,
    SearchResult,
    SlateList,
    SlateWriteResult,
    TurnCommit,
)
from cairn.client._inprocess import ASGIAppTransport
from cairn.client._items import Item, ItemDeleted, ItemSearchResult, NamespaceList
from cairn.client._models import (
    Episode,
    EpisodeBatch,
    EpisodeCreate,
    Health,
    Memory,
    Subject,
    SubjectDeleted,
    SubjectList,
    Timeline,
    Version,
)

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "ASGIAppTransport",
    "AsyncCairn",
    "AuthenticationError",
    "Budget",
    "Cairn",
    "CairnClientError",
    "ChatChunk",
    "ChatCompletion",
    "CompileJob",
    "CompileJobQueued",
    "CompileResult",
    "ConflictError",
    "ContextBundle",
    "ContextItem",
    "DocumentCommit",
    "DocumentDeleted",
    "Episode",
    "EpisodeBatch",
    "EpisodeCreate",
    "Health",
    "InvalidRequestError",
    "Item",
    "ItemDeleted",
    "ItemSearchResult",
    "Memory",
    "MemoryTemplate",
    "Message",
    "ModelList",
    "NamespaceList",
    "NotFoundError",
    "RateLimitError",
    "Run",
    "RunList",
    "Scope",
    "ScopeContext",
    "SearchResult",
    "ServerError",
    "SlateList",
    "SlateWriteResult",
    "Subject",
    "SubjectDeleted",
    "SubjectList",
    "Timeline",
    "TurnCommit",
    "UnexpectedResponseError",
    "Version",
]
