"""Chat messages as OpenAI's clients send them, and the tiny GPT's chat template.

A message's ``content`` is a string or a list of *content parts*. The tiny GPT reads text only:
its text parts are joined with newlines (vLLM's rule), an assistant's ``refusal`` part counts as
text (vLLM's rule too), and any other part (``image_url``, ``input_audio``, ``file``, ...) is a
400 naming the part's type and index, never silently dropped. Roles, as OpenAI defines them:

* ``system`` and ``developer`` (OpenAI's newer name for the same instructions): a plain line;
* ``user`` and ``assistant``: ``User: ...`` and ``Assistant: ...`` lines;
* ``tool`` and ``function`` (results of tool calls), and assistant messages that make
  ``tool_calls`` or a ``function_call``: a 400, since this server offers no tools.

``name`` is accepted and not rendered; an assistant's ``content`` may be null (an empty turn).
Unknown keys of a message or a part are kept for the caller to report (see
:func:`labs.serving.protocol.parse_request`) and otherwise ignored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["ChatMessage", "chat_prompt", "message_text", "ContentError"]


class ContentError(ValueError):
    """A message the template cannot render; ``param`` names where (``messages[1].content[0]``)."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


class ChatMessage(BaseModel):
    """One message of ``messages`` (strict types; unknown keys kept in ``model_extra``)."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict] | None = None
    name: str | None = Field(None, max_length=64)
    tool_calls: list | None = None
    tool_call_id: str | None = None
    function_call: dict | None = None
    refusal: str | None = None
    audio: dict | None = None


def _part_text(part: dict, role: str, where: str) -> str:
    kind = part.get("type")
    if kind == "text" or (kind == "refusal" and role == "assistant"):
        if not isinstance(part.get(kind), str):
            raise ContentError(
                f"{where}.{kind}", f"{where}: a {kind!r} part needs a string {kind!r}"
            )
        return part[kind]
    if not isinstance(kind, str):
        raise ContentError(where + ".type", f"{where}: a content part needs a string 'type'")
    raise ContentError(
        where + ".type",
        f"Unsupported value: {where} is a content part of type {kind!r}; this model reads text "
        "only (send parts of type 'text')",
    )


def message_text(m: ChatMessage, i: int) -> str:
    """The text of message ``i``: its string, or its text parts joined with newlines.
    :class:`ContentError` for what the template cannot render."""
    where = f"messages[{i}]"
    if m.role in ("tool", "function"):
        raise ContentError(where + ".role", f"Unsupported value: {where} has role {m.role!r} "
                           "(a tool's result); this server offers no tools")  # fmt: skip
    for key in ("tool_calls", "function_call", "audio"):
        if getattr(m, key):
            raise ContentError(f"{where}.{key}", f"Unsupported value: {where}.{key}; this server "
                               "offers no tools and no audio")  # fmt: skip
    if m.content is None:
        if m.role == "assistant":
            return ""
        raise ContentError(where + ".content", f"{where}: a {m.role} message needs 'content'")
    if isinstance(m.content, str):
        return m.content
    return "\n".join(
        _part_text(p, m.role, f"{where}.content[{j}]") for j, p in enumerate(m.content)
    )


def chat_prompt(messages) -> str:
    """The tiny GPT's chat template: system (and developer) lines as they are, then
    ``User:``/``Assistant:`` turns, ending with ``Assistant:`` for the model to continue. The
    endpoint also stops at ``"\\nUser:"`` (:data:`labs.serving.stopping.CHAT_END_OF_TURN`).

    ``messages``: :class:`ChatMessage` objects or dicts as OpenAI's clients send them.

    >>> chat_prompt([{"role": "developer", "content": "Be brief."},
    ...              {"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    'Be brief.\\nUser: Hi\\nAssistant:'
    """
    lines = []
    for i, m in enumerate(messages):
        if not isinstance(m, ChatMessage):
            try:
                m = ChatMessage.model_validate(m)
            except ValidationError as err:
                raise ContentError(f"messages[{i}]", f"messages[{i}]: {err}") from None
        text = message_text(m, i)
        lines.append(
            text if m.role in ("system", "developer") else f"{m.role.capitalize()}: {text}"
        )
    return "\n".join(lines + ["Assistant:"])
