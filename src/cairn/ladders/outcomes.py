"""The slate-write outcomes of a run, as the caller sees them beside the reply.

Every ``slateWrite``, gated write and ``recordTemplate`` of a run ends in one of three
outcomes: ``written``; ``skipped`` — there was nothing to write (no JSON, no match, a closed
gate, a value missing, a write an earlier attempt applied), the seed's silent no-op; or
``refused`` — there was something to write and the slate (or the template) refused it (a full
``reject`` folder, an entry larger than its folder, …). Refused writes are what a caller must
not miss: they are returned with the response (the ``cairn`` object), counted in ``/metrics``,
and fail the call when the step says ``onRejected: fail``.
"""

from __future__ import annotations

from typing import Any

from cairn.errors import Conflict

# No-op reasons: nothing to write, which the seed calls a silent no-op.
SKIP_REASONS = frozenset(
    {
        "no_json",
        "schema_mismatch",
        "field_missing",
        "empty_value",
        "gate_closed",
        "slate_write_already_applied",
        "value_missing",
    }
)


class SlateWriteRefused(Conflict):
    """A step with ``onRejected: fail`` had a write refused; the call fails."""

    code = "slate_write_refused"


def outcome_of(result: dict[str, Any]) -> str:
    """``written``, ``skipped`` or ``refused`` for one write result of the trace."""
    if result.get("written"):
        return "written"
    return "skipped" if result.get("reason") in SKIP_REASONS else "refused"


def summarize(step: str, result: dict[str, Any]) -> dict[str, Any]:
    """The caller's view of one write: where it went and what happened, without the trace's
    usage figures."""
    out: dict[str, Any] = {
        "step": step,
        "effect": result.get("effect"),
        "kind": result.get("kind"),
        "outcome": outcome_of(result),
    }
    target = result.get("to")
    if target is None and result.get("slate"):
        target = {k: result.get(k) for k in ("slate", "folder", "file")}
    if target is not None:
        out["to"] = target
    if result.get("template"):
        out["template"] = result["template"]
    if not result.get("written"):
        out["reason"] = result.get("reason")
        out["detail"] = result.get("detail")
    elif result.get("evictions"):
        out["evictions"] = len(result["evictions"])
    return out


def refusal(run_id: str, step: str, writes: list[dict[str, Any]]) -> SlateWriteRefused | None:
    """The error that fails the call when the step's writes (the last of ``writes``, the run's
    so far) hold a refused write; its details carry every write of the run so far."""
    refused = [w for w in writes if w["step"] == step and w["outcome"] == "refused"]
    if not refused:
        return None
    first = refused[0]
    where = "/".join(str(v) for v in (first.get("to") or {}).values()) or first.get("template")
    return SlateWriteRefused(
        f"step {step!r}: the {first['kind']} to {where} was refused ({first['reason']}: "
        f"{first['detail']}), and the step says onRejected: fail",
        details={"run_id": run_id, "step": step, "writes": writes},
    )


class RunInProgress(Conflict):
    """A run with this id is running (another attempt holds it)."""

    code = "run_in_progress"


class IdempotencyKeyReused(Conflict):
    """The run id was used before for a different request."""

    code = "idempotency_key_reused"


__all__ = [
    "SKIP_REASONS",
    "IdempotencyKeyReused",
    "RunInProgress",
    "SlateWriteRefused",
    "outcome_of",
    "refusal",
    "summarize",
]
