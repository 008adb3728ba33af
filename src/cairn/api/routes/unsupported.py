"""Statewave's support-agent extras that Cairn does not have, answered as such.

The ``statewave`` SDK has calls for sensitivity labels, receipts, customer health, SLA,
handoffs and resolutions. Cairn implements Statewave's core (episodes, compile, search,
context, timeline, subjects) but not these, so their routes answer 404 with a code naming the
feature (``receipts_not_supported``, …) instead of the generic "no route": a client can tell
"this server lacks the feature" from a typo in a path. The caller's key is checked first, as on
every other route.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends

from cairn.errors import NotFound
from cairn.http.auth import require_tenant

router = APIRouter(tags=["not supported"])
_PARAM = re.compile(r"\{(\w+)\}")

FEATURES = {
    "labels": "sensitivity labels",
    "receipts": "context receipts",
    "health": "customer health scores",
    "sla": "SLA summaries",
    "handoff": "handoff packs",
    "resolutions": "resolution tracking",
}
ROUTES = [
    ("PATCH", "/v1/memories/{memory_id}/labels", "labels"),
    ("GET", "/admin/memories/with-suggested-labels", "labels"),
    ("POST", "/admin/memories/{memory_id}/promote-labels", "labels"),
    ("GET", "/v1/receipts", "receipts"),
    ("GET", "/v1/receipts/{receipt_id}", "receipts"),
    ("GET", "/v1/receipts/{receipt_id}/verify", "receipts"),  # the SDK sends GET
    ("POST", "/v1/receipts/{receipt_id}/verify", "receipts"),
    ("POST", "/v1/receipts/{receipt_id}/replay", "receipts"),
    ("GET", "/v1/subjects/{subject_id}/health", "health"),
    ("GET", "/v1/subjects/{subject_id}/sla", "sla"),
    ("POST", "/v1/handoff", "handoff"),
    ("GET", "/v1/resolutions", "resolutions"),
    ("POST", "/v1/resolutions", "resolutions"),
]


def not_supported_code(feature: str) -> str:
    return f"{feature}_not_supported"


def _endpoint(feature: str, path: str) -> Callable[..., Any]:
    def answer(tenant: str = Depends(require_tenant), **_path: str) -> None:
        raise NotFound(
            f"{FEATURES[feature]} (a Statewave support-agent feature) are not supported by Cairn",
            code=not_supported_code(feature),
            details={"feature": feature},
        )

    answer.__doc__ = f"Not supported: 404 ``{not_supported_code(feature)}``."
    # The path's parameters declared (as strings: any value gets the same 404), so the
    # OpenAPI document names them as its templates promise.
    params = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str)
        for name in _PARAM.findall(path)
    ]
    tenant_param = inspect.signature(answer).parameters["tenant"]
    answer.__signature__ = inspect.Signature([tenant_param, *params])  # type: ignore[attr-defined]
    return answer


for _method, _path, _feature in ROUTES:
    router.add_api_route(
        _path,
        _endpoint(_feature, _path),
        methods=[_method],
        status_code=404,
        name=f"{_feature}_{_method.lower()}_{_path.count('/')}",
        responses={404: {"description": f"{FEATURES[_feature]} are not supported"}},
    )
