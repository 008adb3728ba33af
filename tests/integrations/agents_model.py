"""An offline ``agents`` model: it answers with canned text and records every input it got."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText


class ScriptedModel(Model):
    """Replies ``replies`` in turn (the last one repeats); ``inputs`` holds each call's input."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies) or ["ok"]
        self.inputs: list[list[TResponseInputItem]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        text = self.replies[min(len(self.inputs) - 1, len(self.replies) - 1)]
        message = ResponseOutputMessage(
            id=f"msg_{len(self.inputs)}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the scripted model does not stream")
