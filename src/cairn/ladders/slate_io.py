"""A run's door to its ladder's slates: reads for ``slateRead`` fields, ``slateWrite`` blocks and
gated writes, bound to the run's tenant, ladder, user and run id, with trace-ready results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.core.slates import WriteOutcome
from cairn.errors import CairnError
from cairn.ladders.config import SlateReadField, StepSpec
from cairn.slates.config import GateSpec, SlateReadSource, SlateWriteSpec
from cairn.slates.declarations import folder_key
from cairn.slates.gates import evaluate_condition
from cairn.slates.service import Slates
from cairn.slates.steps import apply_gated_write, apply_slate_write
from cairn.store.slate_reads import access_items


class SlateAccess:
    def __init__(self, slates: Slates, tenant: str, ladder: str, user: str, run_id: str) -> None:
        self.slates = slates
        self.tenant = tenant
        self.ladder = ladder
        self.user = user or None
        self.run_id = run_id

    def read(self, ref: SlateReadSource, fallback: str | None = None) -> str:
        """The text a ``slateRead`` field sees; ``fallback`` replaces an empty result (an empty
        file, a metatag with no items) and a failed read, as the slates service defines."""
        text = str(
            self.slates.read(
                self.tenant,
                self.ladder,
                ref.slate,
                ref.folder or "",
                ref.file,
                user_id=self.user,
                metatag=ref.metatag,
                depth=ref.depth,
                fallback=fallback,
                run_id=self.run_id,
            )
        )
        # Without a fallback, an empty read is an empty string in the prompt (a metatag with
        # no items too, not "[]").
        return "" if ref.metatag and text == "[]" else text

    def write(self, spec: SlateWriteSpec, output: str, effect: str | None = None) -> dict[str, Any]:
        """Apply a ``slateWrite`` block; a no-match is a recorded no-op, an error is traced.
        ``effect`` names the write within the run: applied at most once per run id."""
        target = spec.to.model_dump()
        try:
            outcome = apply_slate_write(
                self.slates,
                self.tenant,
                self.ladder,
                spec,
                output,
                run_id=self.run_id,
                user_id=self.user,
                effect=effect,
            )
        except CairnError as exc:
            return {
                "kind": "slateWrite",
                "to": target,
                "written": False,
                "reason": exc.code,
                "detail": exc.message,
            }
        return {"kind": "slateWrite", "to": target, **_outcome(outcome)}

    def gated(self, gate: GateSpec, output: str, effect: str | None = None) -> dict[str, Any]:
        """Apply an ``if:`` gated write (the output verbatim, when the condition holds)."""
        try:
            outcome = apply_gated_write(
                self.slates,
                self.tenant,
                self.ladder,
                gate,
                output,
                run_id=self.run_id,
                user_id=self.user,
                effect=effect,
            )
        except CairnError as exc:
            # The branch the write took (the same pure test ``apply_gated_write`` made).
            branch = gate.then_ if evaluate_condition(gate, output) else gate.else_
            to = branch.write.to.model_dump() if branch is not None else None
            return {
                "kind": "gated",
                "to": to,
                "written": False,
                "reason": exc.code,
                "detail": exc.message,
            }
        return {"kind": "gated", **_outcome(outcome)}


def _outcome(outcome: WriteOutcome) -> dict[str, Any]:
    out = outcome.to_dict()
    if outcome.value is not None:
        out["value"] = outcome.value
    return out


def slate_reads(
    slates: Slates, tenant: str, ladder: str, steps: Sequence[StepSpec], user: str | None
) -> list[str]:
    """The slate items (``cairn.store.slate_reads``) that ``steps`` read (``slateRead``
    fields) and may write (``slateWrite`` blocks, both branches of a gate) for ``user``:
    recorded with the run before it reads or writes them, so that deleting such a file (or
    resetting its folder) deletes the run, whose trace may quote it. (The files a write evicts
    entries of are recorded with the write: ``Slates.write``.) A path not declared, or a
    per-user slate without a user, gives nothing: the read or write itself fails."""
    out: dict[str, None] = {}
    for step in steps:
        touched: list[tuple[Any, str | None]] = [
            (f.source, f.source.metatag) for f in step.fields if isinstance(f, SlateReadField)
        ]
        touched += [(w.to, None) for w in step.slate_writes()]
        if step.gate is not None:
            branches = (step.gate.then_, step.gate.else_)
            touched += [(b.write.to, None) for b in branches if b is not None]
        for ref, metatag in touched:
            try:
                sspec = slates.spec(ladder, ref.slate)
                key = folder_key(tenant, ladder, sspec, ref.folder or "", user or None)
            except CairnError:
                continue
            where = (ladder, key.user_id, key.slate, ref.folder, ref.file, metatag)
            out.update(dict.fromkeys(access_items(*where)))
    return list(out)


__all__ = ["SlateAccess", "slate_reads"]
