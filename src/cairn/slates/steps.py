"""What a ladder step does with slates after it ran: ``slateWrite`` and gated (``if:``) writes.

Both return a ``WriteOutcome``: either the committed ``WriteResult`` or a no-op with a stable
``reason``. A ``slateWrite`` that finds nothing to write is recorded (``Slates.skipped_writes``)
and is never an error; errors of the write itself (a full ``reject`` folder, an entry larger than
its folder, an unknown target) are raised as they are.
"""

from __future__ import annotations

from typing import Any

from cairn.core.slates import WriteOutcome
from cairn.slates.config import GateSpec, SlateWriteSpec
from cairn.slates.extract import as_content, extract_value
from cairn.slates.gates import evaluate_condition
from cairn.slates.service import Slates


def apply_slate_write(
    slates: Slates,
    tenant: str,
    ladder: str,
    spec: SlateWriteSpec | dict[str, Any],
    model_output: str,
    run_id: str | None = None,
    user_id: str | None = None,
    effect: str | None = None,
) -> WriteOutcome:
    """Extract JSON from ``model_output``, validate it against ``spec.match``, pick
    ``spec.field`` and write it to ``spec.to``; a value that does not match is a recorded no-op."""
    if isinstance(spec, dict):
        spec = SlateWriteSpec.model_validate(spec)
    to = spec.to
    slates.ensure_known(ladder, to.slate, to.folder, to.file)
    extraction = extract_value(model_output, match=spec.match, field=spec.field)
    if not extraction.ok:
        slates.record_skip(
            tenant,
            ladder,
            to.slate,
            to.folder,
            to.file,
            extraction.reason or "",
            extraction.detail or "",
            run_id=run_id,
            user_id=user_id,
        )
        return WriteOutcome(written=False, reason=extraction.reason, detail=extraction.detail)
    content: Any = extraction.value if spec.on == "mergeByKey" else as_content(extraction.value)
    result = slates.write(
        tenant,
        ladder,
        to.slate,
        to.folder,
        to.file,
        content,
        on=spec.on,
        key=spec.key,
        tags=spec.tags,
        run_id=run_id,
        user_id=user_id,
        effect=effect,
    )
    return WriteOutcome(written=True, result=result, value=as_content(extraction.value))


def apply_gated_write(
    slates: Slates,
    tenant: str,
    ladder: str,
    gate: GateSpec | dict[str, Any],
    output: str,
    run_id: str | None = None,
    user_id: str | None = None,
    effect: str | None = None,
) -> WriteOutcome:
    """Write ``output`` verbatim to ``then.write`` when the condition holds, else to
    ``else.write`` if there is one; otherwise nothing happens (reason ``gate_closed``)."""
    if isinstance(gate, dict):
        gate = GateSpec.model_validate(gate)
    branch = gate.then_ if evaluate_condition(gate, output) else gate.else_
    if branch is None:
        return WriteOutcome(
            written=False,
            reason="gate_closed",
            detail="the condition does not hold and there is no else",
        )
    if output == "":
        return WriteOutcome(written=False, reason="empty_value", detail="the output is empty")
    w = branch.write
    result = slates.write(
        tenant,
        ladder,
        w.to.slate,
        w.to.folder,
        w.to.file,
        output,
        on=w.on,
        key=w.key,
        tags=w.tags,
        run_id=run_id,
        user_id=user_id,
        effect=effect,
    )
    return WriteOutcome(written=True, result=result, value=output)
