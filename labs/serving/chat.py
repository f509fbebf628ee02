"""Chat messages as OpenAI's clients send them, and the tiny GPT's chat template.

A message's ``content`` is a string or a list of *content parts*. The tiny GPT reads text only:
its text parts are joined with newlines (vLLM's rule), an assistant's ``refusal`` part counts as
text (vLLM's rule too), and any other part (``image_url``, ``input_audio``, ``file``, ...) is a
400 naming the part's type and index, never silently dropped. Roles, as OpenAI defines them:

* ``system`` and ``developer`` (OpenAI's newer name for the same instructions): a plain line;
* ``user`` and ``assistant``: ``User: ...`` and ``Assistant: ...`` lines;
* ``tool`` and ``function`` (results of tool calls), and assistant messages that make
  ``tool_calls`` or a ``function_call``: a 400, since this server offers no tools.

A message's ``name`` tells participants of the same role apart (OpenAI's reference: it
"provides the model information to differentiate between participants of the same role"), so
the template shows it: ``User (alice): Hi``. It must match OpenAI's pattern
``^[a-zA-Z0-9_-]{1,64}$``, so it can never break a line or fake a turn. A system or developer
message is a plain line with no speaker, so its ``name`` has no place in the prompt: the reply
names it in its ``Warning`` header as ignored. An assistant's ``content`` may be null (an empty
turn). Unknown keys of a message or a part are kept for the caller to report (see
:func:`labs.serving.protocol.parse_request`) and otherwise ignored.

The template has no special tokens (the vocabulary is newline and printable ASCII), so text is
its only markup: a message whose content holds a line starting ``Assistant:`` or ``User:`` reads,
to the model, as a turn of its own. Models with special tokens keep turn markers out of user
text; this one cannot, and the chapter says so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["ChatMessage", "chat_prompt", "message_text", "speaker", "ContentError"]


class ContentError(ValueError):
    """A message the template cannot render; ``param`` names where (``messages[1].content[0]``)."""

    def __init__(self, param: str, message: str, code: str = "unsupported_value"):
        super().__init__(message)
        self.param, self.code = param, code


class ChatMessage(BaseModel):
    """One message of ``messages`` (strict types; unknown keys kept in ``model_extra``)."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict] | None = None
    name: str | None = Field(None, pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    tool_calls: list | None = None
    tool_call_id: str | None = None
    function_call: dict | None = None
    refusal: str | None = None
    audio: dict | None = None


def _part_text(part: dict, role: str, where: str) -> str:
    kind = part.get("type")
    if kind == "text" or (kind == "refusal" and role == "assistant"):
        if not isinstance(part.get(kind), str):
            raise ContentError(f"{where}.{kind}", f"Invalid type for '{where}.{kind}': a {kind!r} "
                               f"part needs a string {kind!r}.", "invalid_type")  # fmt: skip
        return part[kind]
    if not isinstance(kind, str):
        raise ContentError(where + ".type", f"Invalid type for '{where}.type': a content part "
                           "needs a string 'type'.", "invalid_type")  # fmt: skip
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
        raise ContentError(where + ".content", f"Missing required parameter: '{where}.content' "
                           f"(a {m.role} message needs content).", "missing_required_parameter")  # fmt: skip
    if isinstance(m.content, str):
        return m.content
    return "\n".join(
        _part_text(p, m.role, f"{where}.content[{j}]") for j, p in enumerate(m.content)
    )


def chat_prompt(messages) -> str:
    """The tiny GPT's chat template: system (and developer) lines as they are, then
    ``User:``/``Assistant:`` turns (``User (alice):`` for a named one), ending with
    ``"Assistant: "`` for the model to continue. The separator's space belongs to the template,
    as in a rendered assistant turn, so the reply is the content alone and sending it back
    renders exactly the text the model wrote. The endpoint stops at the start of a user line
    (:data:`labs.serving.stopping.CHAT_END_OF_TURN`).

    ``messages``: :class:`ChatMessage` objects or dicts as OpenAI's clients send them.

    >>> chat_prompt([{"role": "developer", "content": "Be brief."},
    ...              {"role": "user", "name": "ann", "content": [{"type": "text", "text": "Hi"}]}])
    'Be brief.\\nUser (ann): Hi\\nAssistant: '
    """
    lines = []
    for i, m in enumerate(messages):
        if not isinstance(m, ChatMessage):
            try:
                m = ChatMessage.model_validate(m)
            except ValidationError as err:
                raise ContentError(f"messages[{i}]", f"Invalid 'messages[{i}]': {err}",
                                   "invalid_value") from None  # fmt: skip
        text = message_text(m, i)
        if m.role in ("system", "developer"):
            lines.append(text)
        else:
            lines.append(f"{speaker(m.role, m.name)}: {text}")
    return "\n".join(lines + [speaker("assistant") + ": "])


def speaker(role: str, name: str | None = None) -> str:
    """``User``, ``Assistant``, or with a participant's name, ``User (alice)``."""
    return role.capitalize() + (f" ({name})" if name else "")
