"""The ladder runtime: one call of a ladder, from request to reply, with its trace.

Order of a run: claim the run id → prepare hooks → steps in order (render fields, call the
model, apply ``slateWrite`` blocks and gated writes) → commit hooks → store the trace and the
response.

Idempotency: the run id is the ``Idempotency-Key`` header, else generated. A run id already
completed answers from its stored response and writes nothing; one still running is a 409
``run_in_progress``; a failed one (or one whose process died) is taken over and re-run, skipping
the writes an earlier attempt applied: each slate write claims its effect key in its own
transaction, so even a write whose process died before recording it is not repeated. Reusing
a run id for a different request is a 409 ``idempotency_key_reused``. ``memory.turn`` commits
are idempotent per run id by themselves.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Generator, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from cairn.core.ids import utcnow, uuid7
from cairn.errors import CairnError, InvalidInput
from cairn.ladders.attempt import INTERNAL_ERROR, Attempt, step_options, streamed
from cairn.ladders.board import MAIN_CHANNEL, REPLY, STEP_REPLIES, STEPS, Board
from cairn.ladders.hook_trace import run_hook
from cairn.ladders.hooks import RequestContext
from cairn.ladders.outcomes import IdempotencyKeyReused, RunInProgress, refusal, summarize
from cairn.ladders.providers import ChatRequest
from cairn.ladders.records import record_template
from cairn.ladders.redact import redact
from cairn.ladders.registry import Ladder
from cairn.ladders.reply import shown_reply
from cairn.ladders.requests import ReplayedReply, RunOutcome, RunRequest
from cairn.ladders.slate_io import SlateAccess, slate_reads
from cairn.ladders.steps import render_step
from cairn.slates.declarations import check_run_user, check_slate_user
from cairn.slates.errors import WriteAlreadyApplied
from cairn.store.runs import COMPLETED, FAILED

if TYPE_CHECKING:
    from cairn.ladders.host import LadderHost
    from cairn.metrics import Metrics

log = logging.getLogger("cairn.ladders")
# Run ids appear in URL paths (GET /v1/runs/{run_id}), so they keep to path-safe characters.
IDEMPOTENCY_KEY_RE = re.compile(r"^[A-Za-z0-9._:~@+=\-]{1,256}$")
# A running run not finished after this long is taken to be dead (its process stopped).
STALE_AFTER = timedelta(minutes=10)


def check_run_id(value: str) -> str:
    if not IDEMPOTENCY_KEY_RE.match(value):
        raise InvalidInput(
            "Idempotency-Key must be 1-256 characters of A-Z a-z 0-9 . _ : ~ @ + = -",
            code="invalid_idempotency_key",
        )
    return value


class LadderRuntime:
    """Runs ladders against one set of services (store, slates, memory)."""

    def __init__(self, services: LadderHost, metrics: Metrics | None = None) -> None:
        self.services = services
        self.runs = services.store.runs
        # Counts runs by outcome (cairn_ladder_runs_total: completed, failed, replayed).
        self.metrics = metrics

    # ------------------------------------------------------------------ public

    def run(self, ladder: Ladder, request: RunRequest) -> RunOutcome:
        """Run to completion (or replay a completed run id)."""
        for item in self.run_stream(ladder, request, stream=False):
            if isinstance(item, RunOutcome):
                return item
        raise AssertionError("a run ends with its outcome")  # pragma: no cover

    def run_stream(
        self, ladder: Ladder, request: RunRequest, *, stream: bool = True
    ) -> Iterator[str | RunOutcome]:
        """Yield the reply's text deltas as the last step streams them, then the outcome.

        Errors before the first delta raise before anything is yielded, so callers can still
        answer with an error status."""
        if request.user and any(s.partition == "user" for s in ladder.spec.slates):
            # Per-user slate state belongs to the subject named by ``user`` (and goes with
            # DELETE /v1/subjects/…): every surface refuses a user that is no subject id
            # before the run, not at its first slate.
            check_slate_user(request.user)
        elif request.user:
            # The run is kept under its user and erased with that subject: the same rule.
            check_run_user(request.user)
        run_id, skip, attempt = self._claim(ladder, request)
        if isinstance(skip, RunOutcome):
            self._count("replayed")
            if stream:
                yield ReplayedReply(skip.content)
            yield skip
            return
        yield from self._execute(ladder, request, run_id, skip, stream, attempt)

    # ------------------------------------------------------------------ internals

    def _claim(
        self, ladder: Ladder, request: RunRequest
    ) -> tuple[str, set[str] | RunOutcome, datetime | None]:
        """The run id, what to skip (the effects an earlier attempt applied, or the stored
        outcome of a completed run) and this attempt's ownership token."""
        run_id = check_run_id(request.run_id) if request.run_id else f"run-{uuid7().hex}"
        fingerprint = request.fingerprint()
        # The slate files its steps read and may write, recorded with the run before then.
        reads = slate_reads(
            self.services.slates, request.tenant, ladder.ladder, ladder.steps, request.user
        )
        record, created = self.runs.begin(
            request.tenant,
            run_id,
            ladder=ladder.name,
            request_hash=fingerprint,
            model=request.model or "",
            user_id=request.user,
            reads=reads,
        )
        if created:
            return run_id, set(), record.started_at
        if record.request_hash != fingerprint:
            raise IdempotencyKeyReused(
                f"run id {run_id!r} was used for a different request; use a new Idempotency-Key",
                details={"run_id": run_id},
            )
        if record.status == COMPLETED:
            return run_id, RunOutcome.from_record(record), None
        attempt = self.runs.take_over(request.tenant, run_id, stale_before=utcnow() - STALE_AFTER)
        if attempt is not None:
            self.runs.add_items(request.tenant, run_id, reads)
            return run_id, set(record.effects), attempt
        raise RunInProgress(
            f"run {run_id!r} is still running; retry when it has finished",
            details={"run_id": run_id},
        )

    def _execute(
        self,
        ladder: Ladder,
        request: RunRequest,
        run_id: str,
        done: set[str],
        stream: bool,
        attempt: datetime | None = None,
    ) -> Iterator[str | RunOutcome]:
        """One attempt of a run: its body (``_body``), then its outcome recorded
        (``_complete``); a failure is recorded on the run (``_fail``) before it propagates.
        An unexpected error is logged here and recorded without its text, which could carry
        internals (the run's trace and error are shown to API callers)."""
        run = Attempt.begin(ladder, request, run_id, done, attempt, self.services)
        try:
            content = yield from self._body(run, stream)
        except GeneratorExit:
            # The streaming client went away before the end: the run did not finish (its
            # remaining writes and commit hooks did not run), so a retry may run it again.
            message = "the client closed the stream before the run ended"
            self._fail_attempt(run, "client_disconnected", message, "client disconnected")
            raise
        except CairnError as exc:
            # A model server may echo the key it was sent (``Incorrect API key provided: …``):
            # the error reaches the caller, the run's record and the log, so no key may be in it.
            exc.message = redact(exc.message, ladder.secrets)
            exc.args = (exc.message,)
            exc.details = redact(exc.details, ladder.secrets)
            self._fail_attempt(run, exc.code, exc.message, exc.message)
            raise
        except Exception:
            log.exception("run %s failed", run_id)
            self._fail_attempt(run, "internal_error", INTERNAL_ERROR, INTERNAL_ERROR)
            raise
        yield self._complete(run, content)

    def _body(self, run: Attempt, stream: bool) -> Generator[str, None, str]:
        """Prepare hooks, the steps in order, commit hooks; yields the last step's deltas
        when streaming and returns the reply the caller sees."""
        hooks = (
            run.ladder.binding.hooks_for(self.services, run.request.tenant)
            if run.ladder.binding is not None
            else None
        )
        board = run.board
        ctx = RequestContext(
            context_id=board.context_id, message=board.current_message, run_id=run.run_id
        )
        if hooks and hooks.prepare:
            # Until what the hooks read is recorded, a deletion in the tenant takes the run.
            self.runs.mark_reading(run.request.tenant, run.run_id)
        for hook in hooks.prepare if hooks else []:
            run.trace["prepare"].append(run_hook(hook, board, ctx))
        if run.trace["prepare"]:
            # What the hooks read, now: a deletion of it while the steps run takes the run.
            self.runs.add_reads(run.request.tenant, run.run_id, run.trace)
        content = ""
        steps = run.ladder.steps
        for i, step in enumerate(steps):
            content = yield from self._step(run, step, last=i == len(steps) - 1, stream=stream)
        board.set_engine(REPLY, content)
        board.set_engine(
            MAIN_CHANNEL,
            [
                {"role": "user", "content": board.current_message},
                {"role": "assistant", "content": content},
            ],
        )
        for hook in hooks.commit if hooks else []:
            run.trace["commit"].append(run_hook(hook, board, ctx))
        return content

    def _step(
        self, run: Attempt, step: Any, *, last: bool, stream: bool
    ) -> Generator[str, None, str]:
        """One step: render its fields, call the model (streaming the last step's reply when
        asked), apply its writes; returns what later steps and the caller see (stripMatch:
        the writes see the whole reply)."""
        ts = time.perf_counter()
        rendered = render_step(step, run.board, run.slates.read)
        provider, model = run.ladder.router.resolve(step.model or run.request.model)
        chat = ChatRequest(
            model=model, messages=rendered.messages, options=step_options(step, run.request)
        )
        tm = time.perf_counter()
        step_trace: dict[str, Any] = {
            "id": step.id,
            "provider": provider.name,
            "model": model,
            "fields": [f.trace() for f in rendered.fields],
            "slate_reads": rendered.slate_reads(),
            "messages": rendered.messages,
        }
        run.trace["steps"].append(step_trace)
        if last and stream:
            reply = yield from streamed(step, provider.stream(chat))
        else:
            reply = provider.complete(chat)
        shown = shown_reply(step, reply.content)
        run.board.values[STEPS][step.id] = shown
        run.board.values[STEP_REPLIES][step.id] = reply.content
        step_trace["reply"] = reply.content
        step_trace["usage"] = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
        }
        run.usage["prompt_tokens"] += reply.prompt_tokens
        run.usage["completion_tokens"] += reply.completion_tokens
        tw = time.perf_counter()
        step_trace["writes"] = self._writes(
            step,
            reply.content,
            run.slates,
            run.done,
            run.effects,
            run.request.tenant,
            run.run_id,
            run.board,
            record_now=not last,
            attempt=run.attempt,
        )
        end = time.perf_counter()
        # Where the step's time went: fields (slate reads), the model, the writes.
        step_trace["timings_ms"] = {
            "render": round((tm - ts) * 1000, 3),
            "model": round((tw - tm) * 1000, 3),
            "writes": round((end - tw) * 1000, 3),
        }
        step_trace["duration_ms"] = round((end - ts) * 1000, 3)
        run.writes.extend(summarize(step.id, w) for w in step_trace["writes"])
        failed = refusal(run.run_id, step.id, run.writes) if step.onRejected == "fail" else None
        if failed is not None:
            raise failed
        return shown

    def _complete(self, run: Attempt, content: str) -> RunOutcome:
        """Record the finished run (trace, stored response, effects) and build its outcome;
        the write claims go once the stored response answers every retry."""
        tenant, run_id, trace, usage = run.request.tenant, run.run_id, run.trace, run.usage
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        trace["board"] = {k: v for k, v in run.board.user_variables().items()}
        trace["reply"] = content
        trace["usage"] = usage
        # The response names the model the caller asked for, else the ladder.
        model_name = run.request.model or run.ladder.name
        outcome = RunOutcome(run_id, run.ladder.name, content, model_name, run.created, usage)
        outcome.writes = run.writes
        duration = (time.perf_counter() - run.t0) * 1000
        trace["duration_ms"] = round(duration, 3)
        clean = redact(trace, run.ladder.secrets)
        owned = self.runs.finish(
            tenant,
            run_id,
            status=COMPLETED,
            duration_ms=duration,
            trace=clean,
            response=outcome.completion(),
            effects=run.effects,
            attempt=run.attempt,
        )
        if not owned:
            # A later attempt took the run over (this one looked dead): its record and its
            # write claims are the run's now. Or a deletion took the run, as it quoted (or
            # might have quoted) what was deleted (``cairn.store.run_reads``).
            log.warning(
                "run %s was taken over by another attempt or deleted with what it read; "
                "this attempt's end is not recorded",
                run_id,
            )
        elif any("/slateWrite/" in e or e.endswith("/if") for e in run.effects):
            try:  # the stored response answers every retry now; the claims are not needed
                self.services.slates.forget_applied_writes(tenant, run_id)
            except Exception:
                log.exception("could not drop the write claims of run %s", run_id)
        outcome.trace = clean
        if owned:  # a run taken over is the other attempt's to count
            self._count("completed")
        return outcome

    def _fail_attempt(self, run: Attempt, code: str, message: str, error: str) -> None:
        run.trace["error"] = {"code": code, "message": message}
        self._fail(
            run.request.tenant,
            run.run_id,
            run.t0,
            run.trace,
            run.ladder,
            run.effects,
            error,
            run.attempt,
        )

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.ladder_runs.labels(outcome).inc()

    def _writes(
        self,
        step: Any,
        output: str,
        slates: SlateAccess,
        done: set[str],
        effects: list[str],
        tenant: str,
        run_id: str,
        board: Board,
        *,
        record_now: bool,
        attempt: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """Apply the step's slateWrite blocks and its gated write.

        Each applied write is recorded in the run's ``effects`` at once when more model calls
        follow (a process dying during them must not repeat it on a retry); the last step's
        writes are recorded with the run's end (``finish`` or ``_fail``), which comes right
        after, saving a database round trip per call."""
        out: list[dict[str, Any]] = []
        jobs: list[tuple[str, Any]] = [
            (f"{step.id}/slateWrite/{k}", w) for k, w in enumerate(step.slate_writes())
        ]
        if step.gate is not None:
            jobs.append((f"{step.id}/if", step.gate))
        if step.recordTemplate is not None:
            jobs.append((f"{step.id}/recordTemplate", step.recordTemplate))
        for key, spec in jobs:
            if key in done:
                out.append(
                    {
                        "effect": key,
                        "written": False,
                        "reason": WriteAlreadyApplied.code,
                        "detail": "already applied by an earlier attempt of this run",
                    }
                )
                continue
            if key.endswith("/if"):
                result = slates.gated(spec, output, effect=key)
            elif key.endswith("/recordTemplate"):
                host = self.services
                result = record_template(
                    host.store,
                    host.templates,
                    host.ingest_listeners,
                    tenant,
                    spec,
                    board,
                    f"{run_id}:{step.id}",
                )
            else:
                result = slates.write(spec, output, effect=key)
            result = {"effect": key, **result}
            out.append(result)
            if result.get("written"):
                effects.append(key)
                if record_now:
                    self.runs.add_effect(tenant, run_id, effects, attempt=attempt)
            elif result.get("reason") == WriteAlreadyApplied.code:
                # Applied by an attempt that died before recording it: the write's own claim
                # (in its transaction) stopped the repeat.
                effects.append(key)
        return out

    def _fail(
        self,
        tenant: str,
        run_id: str,
        t0: float,
        trace: dict[str, Any],
        ladder: Ladder,
        effects: list[str],
        message: str,
        attempt: datetime | None = None,
    ) -> None:
        duration = (time.perf_counter() - t0) * 1000
        trace["duration_ms"] = round(duration, 3)
        self._count("failed")
        try:
            self.runs.finish(
                tenant,
                run_id,
                status=FAILED,
                duration_ms=duration,
                trace=redact(trace, ladder.secrets),
                error=message,
                effects=effects,
                attempt=attempt,
            )
        except Exception:  # never hide the run's own error behind a bookkeeping one
            log.exception("could not record the failure of run %s", run_id)


__all__ = [
    "IdempotencyKeyReused",
    "LadderRuntime",
    "RunInProgress",
    "RunOutcome",
    "RunRequest",
]
