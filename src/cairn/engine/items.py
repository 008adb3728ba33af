"""Items: put, get, delete, search and the namespaces of a key-value store inside a scope.

What LangGraph's ``BaseStore`` needs from Cairn (``cairn.integrations.langgraph``), kept
general: a namespace is a path of labels, a key names an item in it, a value is a JSON object.

- **Text**: an item's text is the strings the caller names (``index_text``), or every string
  in the value; it is analysed like every text in Cairn (``cairn.core.analysis``), so items in
  any script are found by their own words.
- **Search** ranks the live items under a namespace prefix that pass ``filter``: with
  ``query_vector``, by the largest cosine between it and the vectors the caller stored with
  the item (its own embedding function; items without such vectors follow, unscored); with
  ``query`` only, by Cairn's lanes — the share of the query's terms the item's text holds,
  blended with the cosine of the server's embedder when it has one (weights of
  ``cairn.engine.search``); without either, in the order items were first stored. Ties keep
  that order, so results are deterministic.
- **Filters** compare top-level fields of the value (a missing one is ``null``): a plain value
  is equality, an object matches field by field, a list item by item, and an operator object
  uses ``$eq``, ``$ne`` or, on numbers, ``$gt``, ``$gte``, ``$lt``, ``$lte``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cairn.core.analysis import index_text, query_terms
from cairn.core.ids import utcnow
from cairn.core.scope import Scope
from cairn.engine.embedders import Embedder, EmbedderError
from cairn.engine.embedders import query_vector as vector_of_query
from cairn.engine.search import lane_weights
from cairn.errors import InvalidInput
from cairn.store import Store
from cairn.store.items import CLIENT_VECTORS, ItemWrite, StoredItem

log = logging.getLogger("cairn")

MAX_DEPTH = 32
MAX_LABEL = 128
MAX_PATH = 512  # the stored path, dots included: it is in a B-tree index
MAX_KEY = 1024
MAX_VECTORS = 64
MAX_DIMS = 4096
MAX_TTL_SECONDS = 10 * 366 * 86400
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


@dataclass(frozen=True, slots=True)
class FoundItem:
    item: StoredItem
    score: float | None


def check_namespace(labels: Sequence[str], *, allow_empty: bool = False, field: str) -> None:
    """A namespace: 1 to 32 labels, each 1 to 128 characters without a dot."""
    if not labels and not allow_empty:
        raise InvalidInput(f"{field} must have at least one label", code="invalid_namespace")
    if len(labels) > MAX_DEPTH:
        raise InvalidInput(f"{field} has more than {MAX_DEPTH} labels", code="invalid_namespace")
    for i, label in enumerate(labels):
        if not label or len(label) > MAX_LABEL or "." in label:
            raise InvalidInput(
                f"{field}[{i}] must be 1 to {MAX_LABEL} characters without a '.'",
                code="invalid_namespace",
                details={"label": label[:MAX_LABEL]},
            )
    if sum(len(label) + 1 for label in labels) > MAX_PATH:
        raise InvalidInput(
            f"{field} is longer than {MAX_PATH} characters", code="invalid_namespace"
        )


def value_strings(value: Any) -> list[str]:
    """Every string in a JSON value (object values in order, list items in order)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in value_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in value_strings(v)]
    return []


def _vectors_blob(vectors: Sequence[Sequence[float]]) -> tuple[bytes, int]:
    """The caller's vectors as one float32 matrix, each row unit length."""
    if len(vectors) > MAX_VECTORS:
        raise InvalidInput(f"at most {MAX_VECTORS} vectors per item", code="invalid_vectors")
    dims = {len(v) for v in vectors}
    if len(dims) != 1 or not 0 < next(iter(dims)) <= MAX_DIMS:
        raise InvalidInput(
            f"vectors must all have the same length, 1 to {MAX_DIMS}", code="invalid_vectors"
        )
    matrix = np.asarray(vectors, dtype=np.float64)
    if not np.all(np.isfinite(matrix)):
        raise InvalidInput("vectors must hold finite numbers", code="invalid_vectors")
    return np.vstack([unit(row) for row in matrix]).astype("<f4").tobytes(), matrix.shape[1]


def unit(vector: np.ndarray) -> np.ndarray:
    """The vector scaled to length 1 (zeros stay zeros), without overflow for huge numbers."""
    top = float(np.max(np.abs(vector))) if vector.size else 0.0
    if top == 0.0:
        return np.zeros_like(vector, dtype=np.float64)
    scaled = vector.astype(np.float64) / top
    return scaled / float(np.linalg.norm(scaled))


def plan_item(
    namespace: Sequence[str],
    key: str,
    value: dict[str, Any],
    *,
    index: list[str] | None,
    vectors: list[list[float]] | None,
    ttl_seconds: float | None,
    embedder: Embedder | None,
) -> ItemWrite:
    """What to store for one item: its analysed text and its vectors (the caller's, or the
    server embedder's of its text; none when the text is empty)."""
    check_namespace(namespace, field="namespace")
    if len(key) > MAX_KEY:
        raise InvalidInput(f"key is longer than {MAX_KEY} characters", code="invalid_key")
    if ttl_seconds is not None and not 0 < ttl_seconds <= MAX_TTL_SECONDS:
        raise InvalidInput("ttl_seconds must be > 0 and at most ten years", code="invalid_ttl")
    text = "\n".join(index if index is not None else value_strings(value))
    blob: bytes | None = None
    dims = 0
    source = ""
    if vectors:
        blob, dims = _vectors_blob(vectors)
        source = CLIENT_VECTORS
    elif embedder is not None and text.strip():
        try:
            blob, dims = _vectors_blob(embedder.embed([text]))
            source = embedder.name
        except EmbedderError as exc:  # stored all the same: found by its words meanwhile
            log.warning("item stored without a vector: %s", exc.message)
    return ItemWrite(
        namespace=tuple(namespace),
        key=key,
        value=value,
        search_text=index_text(text),
        embedding=blob,
        embedding_dims=dims,
        embedding_source=source,
        ttl_seconds=ttl_seconds,
    )


def put_item(store: Store, tenant_id: str, scope: Scope, item: ItemWrite) -> StoredItem:
    return store.items.put(tenant_id, scope, item, utcnow())


def get_item(
    store: Store, tenant_id: str, scope: Scope, namespace: Sequence[str], key: str, refresh: bool
) -> StoredItem | None:
    check_namespace(namespace, field="namespace")
    now = utcnow()
    found: StoredItem | None = store.items.get(tenant_id, scope, namespace, key, now)
    if found is not None and refresh and found.expires_at is not None:
        store.items.refresh(tenant_id, scope, [found.seq], now)
        found = store.items.get(tenant_id, scope, namespace, key, now)
    return found


def delete_item(
    store: Store, tenant_id: str, scope: Scope, namespace: Sequence[str], key: str
) -> bool:
    check_namespace(namespace, field="namespace")
    deleted = bool(store.items.delete(tenant_id, scope, namespace, key))
    if deleted:
        store.lifecycle.checkpoint()  # (SQLite: the log keeps no page of the value)
    return deleted


# --------------------------------------------------------------------------- filters


def check_filter(filter: dict[str, Any]) -> None:
    """Every operator object, at any depth, uses only the known operators."""
    for field, wanted in filter.items():
        _check_condition(field, wanted)


def _check_condition(field: str, wanted: Any) -> None:
    if isinstance(wanted, list):
        for part in wanted:
            _check_condition(field, part)
    if not isinstance(wanted, dict):
        return
    if any(k.startswith("$") for k in wanted):
        unknown = sorted(set(wanted) - OPERATORS)
        if unknown:
            raise InvalidInput(
                f"filter on {field!r}: unknown operator(s) {', '.join(unknown)}",
                code="invalid_filter",
                details={"operators": sorted(OPERATORS)},
            )
        return
    for name, part in wanted.items():
        _check_condition(f"{field}.{name}", part)


def _number(value: Any) -> float | None:
    """The number a value holds (a numeric string too: ``"5"``); None otherwise, and for
    ``true`` and ``false``, which are not numbers (Python counts them as 1 and 0)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # (an integer of 400 digits overflows)
        return None
    return number if math.isfinite(number) else None


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1`` and ``1.0`` are equal, ``1`` and ``true`` are not (as
    in Python, where ``True == 1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return bool(a == b)


def _compare(actual: Any, op: str, wanted: Any) -> bool:
    """One operator, as PostgreSQL compares JSON: ``$gt`` and the like compare numbers (a
    value that is not one never matches)."""
    if op == "$eq":
        return _json_equal(actual, wanted)
    if op == "$ne":
        return not _json_equal(actual, wanted)
    a, w = _number(actual), _number(wanted)
    if a is None or w is None:
        return False
    return {"$gt": a > w, "$gte": a >= w, "$lt": a < w, "$lte": a <= w}[op]


def _matches_value(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_compare(actual, o, w) for o, w in wanted.items())
        # An object matches when each of its fields does (a partial match, like ``@>``).
        return isinstance(actual, dict) and all(
            _matches_value(actual.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(wanted)
            and all(_matches_value(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return _json_equal(actual, wanted)


def matches(value: dict[str, Any], filter: dict[str, Any]) -> bool:
    """Whether a value passes every condition of the filter (a missing field is ``null``)."""
    return all(_matches_value(value.get(field), wanted) for field, wanted in filter.items())


# --------------------------------------------------------------------------- ranking


def _matrix(item: StoredItem) -> np.ndarray:
    assert item.embedding is not None
    return np.frombuffer(item.embedding, dtype="<f4").reshape(-1, item.embedding_dims)


def _vector_scores(
    candidates: list[StoredItem], query: np.ndarray, source: str
) -> dict[int, float]:
    """``seq → largest cosine`` of the items with vectors of ``source`` and the query's size."""
    if not np.any(query):
        return {}
    q = unit(query).astype("<f4")
    return {
        c.seq: float(np.max(_matrix(c) @ q))
        for c in candidates
        if c.embedding is not None
        and c.embedding_source == source
        and c.embedding_dims == q.shape[0]
    }


def _lexical_scores(candidates: list[StoredItem], query: str) -> dict[int, float]:
    """``seq → share of the query's terms in the item's text`` (0 to 1)."""
    terms = query_terms(query)
    if not terms:
        return {}
    out: dict[int, float] = {}
    for c in candidates:
        held = set(c.search_text.split())
        hits = sum(1 for t in terms if t in held)
        if hits:
            out[c.seq] = hits / len(terms)
    return out


def rank(
    candidates: list[StoredItem],
    *,
    query: str | None,
    query_vector: list[float] | None,
    embedder: Embedder | None,
) -> list[FoundItem]:
    """The candidates best first (see the module docstring)."""
    if query_vector is not None:
        if not 1 <= len(query_vector) <= MAX_DIMS or not all(
            math.isfinite(x) for x in query_vector
        ):
            raise InvalidInput(
                f"query_vector must hold 1 to {MAX_DIMS} finite numbers", code="invalid_vectors"
            )
        scores = _vector_scores(candidates, np.asarray(query_vector), CLIENT_VECTORS)
        sizes = {
            c.embedding_dims
            for c in candidates
            if c.embedding is not None and c.embedding_source == CLIENT_VECTORS
        }
        if sizes and len(query_vector) not in sizes:
            # Nothing could be scored: a vector of another model, most likely.
            raise InvalidInput(
                f"query_vector has {len(query_vector)} numbers; the items' own vectors have "
                f"{', '.join(str(n) for n in sorted(sizes))}",
                code="invalid_vectors",
            )
        scored = [FoundItem(c, scores[c.seq]) for c in candidates if c.seq in scores]
        scored.sort(key=lambda f: -(f.score or 0.0))
        return scored + [FoundItem(c, None) for c in candidates if c.seq not in scores]
    if not query or not query.strip():
        return [FoundItem(c, None) for c in candidates]
    lexical = _lexical_scores(candidates, query)
    vector: dict[int, float] = {}
    if embedder is not None:
        q = np.asarray(vector_of_query(embedder, query), dtype=np.float64)
        vector = {s: max(0.0, v) for s, v in _vector_scores(candidates, q, embedder.name).items()}
    weights = lane_weights(embedder, query) if vector else {"lexical": 1.0, "vector": 0.0}
    found = [
        FoundItem(
            c,
            weights["lexical"] * lexical.get(c.seq, 0.0)
            + weights["vector"] * vector.get(c.seq, 0.0),
        )
        for c in candidates
    ]
    found.sort(key=lambda f: -(f.score or 0.0))
    return found


def by_namespace(found: list[StoredItem]) -> list[StoredItem]:
    """Items grouped by namespace, namespaces in the order their first live item was stored,
    items in the order they were (what iterating LangGraph's ``InMemoryStore`` gives)."""
    first: dict[tuple[str, ...], int] = {}
    for item in found:
        first.setdefault(item.namespace, item.seq)
    return sorted(found, key=lambda i: (first[i.namespace], i.seq))


def search_items(
    store: Store,
    tenant_id: str,
    scope: Scope,
    prefix: Sequence[str],
    *,
    filter: dict[str, Any] | None,
    query: str | None,
    query_vector: list[float] | None,
    limit: int,
    offset: int,
    refresh: bool,
    embedder: Embedder | None,
) -> list[FoundItem]:
    """One page of the ranked items under ``prefix`` (empty: the whole scope)."""
    check_namespace(prefix, allow_empty=True, field="namespace_prefix")
    check_filter(filter or {})
    now = utcnow()
    ranked = query_vector is not None or bool(query and query.strip())
    candidates = by_namespace(store.items.under(tenant_id, scope, prefix, now, ranked=ranked))
    if filter:
        candidates = [c for c in candidates if matches(c.value, filter)]
    page = rank(candidates, query=query, query_vector=query_vector, embedder=embedder)[
        offset : offset + limit
    ]
    if refresh and any(f.item.expires_at is not None for f in page):
        store.items.refresh(tenant_id, scope, [f.item.seq for f in page], now)
    return page


# --------------------------------------------------------------------------- namespaces


def _matches_path(pattern: Sequence[str], labels: Sequence[str]) -> bool:
    return len(labels) >= len(pattern) and all(
        p == "*" or p == label for p, label in zip(pattern, labels, strict=False)
    )


def list_namespaces(
    store: Store,
    tenant_id: str,
    scope: Scope,
    *,
    prefix: Sequence[str] | None,
    suffix: Sequence[str] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """The namespaces holding live items, sorted: those starting with ``prefix`` and ending
    with ``suffix`` (``*`` matches any one label), cut to ``max_depth`` labels and deduplicated.
    The labels of ``prefix`` before its first ``*`` narrow the query itself."""
    for name, pattern in (("prefix", prefix), ("suffix", suffix)):
        if pattern:
            literal = [p for p in pattern if p != "*"]
            check_namespace(literal, allow_empty=True, field=name)
    literal_prefix: list[str] = []
    for label in prefix or ():
        if label == "*":
            break
        literal_prefix.append(label)
    found = store.items.namespaces(tenant_id, scope, literal_prefix, utcnow())
    if prefix:
        found = [ns for ns in found if _matches_path(prefix, ns)]
    if suffix:
        found = [ns for ns in found if _matches_path(suffix[::-1], ns[::-1])]
    if max_depth is not None:
        found = [ns[:max_depth] for ns in found]
    return sorted(set(found))[offset : offset + limit]
