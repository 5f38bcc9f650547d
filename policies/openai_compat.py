"""A policy behind any OpenAI-compatible chat server, over the ``openai`` SDK (vLLM is the reference).

Requests and responses go through two pure functions, :func:`build_chat_request` and
:func:`completion_from_response`, so both are tested without a server. Details that follow
vLLM's OpenAI-compatible server:

- images are PNG ``data:`` URLs in ``image_url`` parts appended to the last user message;
- the token limit is sent as ``max_completion_tokens`` (vLLM deprecates ``max_tokens``);
- vLLM-only fields (``top_k``, ``structured_outputs``, ``chat_template_kwargs``,
  ``return_token_ids``, ...) travel in ``extra_body``;
- vLLM's ``reasoning`` (formerly ``reasoning_content``), ``stop_reason`` and token ids land
  in :attr:`Completion.extra`.

The SDK retries connection errors, timeouts, 408/409/429 and 5xx with exponential backoff
(0.5 s doubling, jittered) up to ``max_retries`` times; what still fails becomes a
:class:`PolicyError` that names the server and the cause.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import openai
from numpy.typing import NDArray
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from PIL import Image

from embodia.core import chat
from embodia.core.chat import ContextOverflowError, PolicyError
from embodia.core.random_weights import random_weights_note
from embodia.core.tool_calls import ToolCall, ToolChoice, call_from_parts, chosen_name, forces_call

logger = logging.getLogger(__name__)

MAX_TOP_LOGPROBS = 20
"""The most ``top_logprobs`` the OpenAI API (and vLLM's default ``--max-logprobs``) allows."""

PROBE_SIDE = 32
"""Side in pixels of the picture :meth:`OpenAICompatPolicy.check_accepts_images` sends: small to
send; a VLM's processor brings it to its own input size."""
TEXT_ONLY_REPLY = re.compile(r"not a multimodal model|At most 0 image", re.IGNORECASE)
"""What vLLM says when a request's image reaches a model that takes none."""

_FINISH_REASONS: dict[str, chat.FinishReason] = {
    "stop": "stop",
    "tool_calls": "stop",
    "function_call": "stop",
    "length": "length",
}


def png_base64(image: NDArray[np.uint8]) -> str:
    """An (H, W, 3) uint8 RGB image as lossless PNG bytes in base64."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def image_data_url(image: NDArray[np.uint8]) -> str:
    """An (H, W, 3) uint8 RGB image as a lossless ``data:image/png;base64,...`` URL."""
    return "data:image/png;base64," + png_base64(image)


def wire_messages(
    messages: Sequence[chat.Message], images: Sequence[NDArray[np.uint8]] = ()
) -> list[dict[str, Any]]:
    """The conversation as the chat API takes it: ``images`` become ``image_url`` parts after
    the text of the last user message (the caller's messages are not modified). The input is
    taken as :func:`~embodia.core.chat.check_messages` passes it."""
    wire: list[dict[str, Any]] = []
    for m in messages:
        entry: dict[str, Any] = {"role": m["role"], "content": m["content"]}
        if "tool_calls" in m:
            entry["tool_calls"] = [dict(call) for call in m["tool_calls"]]
        if "tool_call_id" in m:
            entry["tool_call_id"] = m["tool_call_id"]
        wire.append(entry)
    if images:
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        parts: list[dict[str, Any]] = [{"type": "text", "text": messages[last_user]["content"]}]
        parts += [{"type": "image_url", "image_url": {"url": image_data_url(image)}} for image in images]
        wire[last_user]["content"] = parts
    return wire


def build_chat_request(
    messages: Sequence[chat.Message],
    images: Sequence[NDArray[np.uint8]] = (),
    *,
    model: str,
    params: chat.SamplingParams | None = None,
    extra_body: Mapping[str, Any] | None = None,
    tools: chat.Tools = (),
    tool_choice: ToolChoice = "auto",
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` (``params`` default:
    :class:`SamplingParams`'s defaults).

    Messages as :func:`wire_messages` makes them. ``logprobs`` and ``top_logprobs`` are sent
    only when asked for (``top_logprobs > 0`` implies ``logprobs``); ``stop`` and
    ``extra_body`` only when non-empty; ``tools`` with their ``tool_choice`` (a named one as
    ``{"type": "function", "function": {"name": N}}``) only when there are tools.

    A choice that forces a call asks for exactly one (``parallel_tool_calls: false``) whose
    arguments match their schema: each tool is sent ``strict`` unless it says otherwise,
    which is what makes vLLM decode the arguments under the schema and not only the call's
    envelope. The other backends decode a forced call the same way
    (:func:`~embodia.core.tool_calls.forced_call_schema`).
    """
    params = params or chat.SamplingParams()
    request: dict[str, Any] = {
        "model": model,
        "messages": wire_messages(messages, images),
        "max_completion_tokens": params.max_tokens,
        "temperature": params.temperature,
    }
    if params.wants_logprobs:
        request["logprobs"] = True
        if params.top_logprobs:
            request["top_logprobs"] = params.top_logprobs
    if params.stop:
        request["stop"] = list(params.stop)
    if tools:
        named = chosen_name(tool_choice)
        request["tools"] = wire_tools(tools, tool_choice)
        request["tool_choice"] = (
            tool_choice if named is None else {"type": "function", "function": {"name": named}}
        )
        if forces_call(tool_choice):
            request["parallel_tool_calls"] = False
    if extra_body:
        request["extra_body"] = dict(extra_body)
    return request


def wire_tools(tools: chat.Tools, tool_choice: ToolChoice) -> list[dict[str, Any]]:
    """The ``tools`` as sent: under a choice that forces a call, each ``"strict": true``
    unless it sets ``strict`` itself (the template lists them so, which the prompt's token
    count must include)."""
    if not forces_call(tool_choice):
        return [dict(tool) for tool in tools]
    return [
        {**tool, "function": {**tool["function"], "strict": tool["function"].get("strict", True)}}
        for tool in tools
    ]


def parse_chat_body(body: str, source: str) -> ChatCompletion:
    """A chat completion from the raw response text; PolicyError when it is not one."""
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        raise PolicyError(f"malformed reply from {source}: not JSON: {_one_line(body, 80)!r}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"malformed reply from {source}: expected a JSON object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise PolicyError(f"malformed reply from {source}: no choices in {_one_line(body, 80)!r}")
    if not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise PolicyError(f"malformed reply from {source}: choice 0 has no message")
    # construct, not validate: vLLM adds fields and finish reasons the OpenAI schema lacks
    return ChatCompletion.model_construct(**data)


def collect_stream(chunks: Iterable[ChatCompletionChunk], on_text: Callable[[str], None]) -> ChatCompletion:
    """The chat completion a stream of chunks adds up to (choice 0), handing each piece of
    content to ``on_text`` as it arrives. The usage comes from the last chunk when the request
    asked for ``stream_options={"include_usage": True}``."""
    content: list[str] = []
    reasoning: list[str] = []
    items: list[Any] = []
    token_ids: list[int] = []
    finish: str | None = None
    stop_reason: object = None
    usage: Any = None
    ids = {"id": "", "model": ""}
    prompt_token_ids: object = None
    calls: dict[int, dict[str, str]] = {}
    seen = False
    for chunk in chunks:
        ids["id"] = ids["id"] or str(chunk.id or "")
        ids["model"] = ids["model"] or str(chunk.model or "")
        if chunk.usage is not None:
            usage = chunk.usage
        if (chunk.model_extra or {}).get("prompt_token_ids") is not None:
            prompt_token_ids = (chunk.model_extra or {})["prompt_token_ids"]
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            seen = True
            delta = choice.delta
            if delta is not None and delta.content:
                content.append(delta.content)
                on_text(delta.content)
            for part in (delta.tool_calls if delta is not None else None) or ():
                # a call arrives in parts: its id and name first, its arguments' text after
                call = calls.setdefault(int(part.index), {"id": "", "name": "", "arguments": ""})
                call["id"] = call["id"] or str(part.id or "")
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
            delta_extra = (delta.model_extra if delta is not None else None) or {}
            if piece := delta_extra.get("reasoning") or delta_extra.get("reasoning_content"):
                reasoning.append(str(piece))
            if choice.logprobs is not None and choice.logprobs.content:
                items.extend(choice.logprobs.content)
            choice_extra = choice.model_extra or {}
            token_ids.extend(choice_extra.get("token_ids") or ())
            if choice_extra.get("stop_reason") is not None:
                stop_reason = choice_extra["stop_reason"]
            if choice.finish_reason is not None:
                finish = str(choice.finish_reason)
    if not seen:
        raise PolicyError("the stream ended without a single choice")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
    if reasoning:
        message["reasoning"] = "".join(reasoning)
    assembled: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": finish,
        "logprobs": {"content": items} if items else None,
    }
    if token_ids:
        assembled["token_ids"] = token_ids
    if stop_reason is not None:
        assembled["stop_reason"] = stop_reason
    data: dict[str, Any] = {
        **ids,
        "object": "chat.completion",
        "created": 0,
        "choices": [assembled],
        "usage": usage,
    }
    if prompt_token_ids is not None:
        data["prompt_token_ids"] = prompt_token_ids
    return ChatCompletion.model_construct(**data)


def completion_from_response(
    response: ChatCompletion,
    latency_s: float,
    *,
    source: str = "the policy server",
    top_logprobs: int | None = None,
) -> chat.Completion:
    """Our :class:`Completion` from the first choice of a chat completion.

    With ``top_logprobs`` each position's alternatives are sorted best first and cut to that
    many (the request may have asked for one more: see :class:`OpenAICompatPolicy`).
    """
    if not response.choices:
        raise PolicyError(f"malformed reply from {source}: no choices")
    choice = response.choices[0]
    content = choice.message.content
    if content is not None and not isinstance(content, str):
        raise PolicyError(
            f"malformed reply from {source}: message content is {type(content).__name__}, not text"
        )
    raw_finish = str(choice.finish_reason) if choice.finish_reason is not None else None
    finish_reason = _FINISH_REASONS.get(raw_finish or "", "error")
    tokens: tuple[chat.TokenLogprob, ...] = ()
    if choice.logprobs is not None and choice.logprobs.content:
        tokens = tuple(
            chat.TokenLogprob(
                token=t.token,
                logprob=float(t.logprob),
                top=_ranked(
                    ((alt.token, float(alt.logprob)) for alt in (t.top_logprobs or ())), top_logprobs
                ),
            )
            for t in choice.logprobs.content
        )
    usage = response.usage
    extra: dict[str, object] = {}
    message_extra = choice.message.model_extra or {}
    reasoning = message_extra.get("reasoning") or message_extra.get("reasoning_content")
    if reasoning:
        extra["reasoning"] = reasoning
    for key, value in (choice.model_extra or {}).items():
        if key in ("stop_reason", "token_ids") and value is not None:
            extra[key] = value
    prompt_token_ids = (response.model_extra or {}).get("prompt_token_ids")
    if prompt_token_ids is not None:
        extra["prompt_token_ids"] = prompt_token_ids
    if raw_finish not in ("stop", "length"):
        extra["finish_reason"] = raw_finish
    if response.id:
        extra["id"] = response.id
    calls = _tool_calls(choice.message.tool_calls, source)
    return chat.Completion(
        text=content or "",
        finish_reason=finish_reason,
        prompt_tokens=int(usage.prompt_tokens) if usage is not None else 0,
        completion_tokens=int(usage.completion_tokens) if usage is not None else len(tokens),
        latency_s=latency_s,
        tokens=tokens,
        model=str(response.model or ""),
        extra=extra,
        tool_calls=calls,
    )


def _tool_calls(wire: Any, source: str) -> tuple[ToolCall, ...]:
    """The calls of a reply message (its ``tool_calls``, which the server parsed), arguments
    read from their JSON text; a call that is not one is a PolicyError."""
    calls = []
    for i, call in enumerate(wire or ()):
        entry = call if isinstance(call, Mapping) else call.model_dump()
        function = entry.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise PolicyError(f"malformed reply from {source}: tool call {i} has no function name")
        call_id = str(entry.get("id") or f"call_{i}")
        calls.append(call_from_parts(call_id, function["name"], function.get("arguments") or ""))
    return tuple(calls)


def _ranked(alternatives: Iterable[tuple[str, float]], keep: int | None) -> tuple[tuple[str, float], ...]:
    listed = list(alternatives)
    if keep is None:
        return tuple(listed)
    return tuple(sorted(listed, key=lambda alt: -alt[1])[:keep])


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _server_message(error: openai.APIStatusError) -> str:
    """The message a server put in its error body (OpenAI and vLLM shapes), else the SDK's."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return _one_line(inner["message"])
        if isinstance(inner, str):
            return _one_line(inner)
        if isinstance(body.get("message"), str):
            return _one_line(body["message"])
    if isinstance(body, str) and body.strip():
        return _one_line(body)
    return _one_line(error.message)


def _connection_cause(error: BaseException) -> str:
    """What went wrong under an APIConnectionError, in a few words ("connection refused")."""
    seen: set[int] = set()
    cause: BaseException | None = error
    deepest = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            return "connection refused"
        deepest = cause
        cause = cause.__cause__ or cause.__context__
    text = _one_line(str(deepest)) or type(deepest).__name__
    return text


def policy_error_from_openai(
    error: openai.OpenAIError, base_url: str, *, timeout_s: float, retries: int
) -> PolicyError:
    """One clear line for an SDK error, naming the server."""
    after = f" (after {retries} {'retry' if retries == 1 else 'retries'})" if retries else ""
    if isinstance(error, openai.APITimeoutError):
        return PolicyError(f"the policy server at {base_url} did not answer within {timeout_s:g} s{after}")
    if isinstance(error, openai.APIConnectionError):
        return PolicyError(f"cannot reach the policy server at {base_url}: {_connection_cause(error)}{after}")
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if status >= 500:
            return PolicyError(
                f"the policy server at {base_url} failed with HTTP {status}{after}: {_server_message(error)}"
            )
        return PolicyError(
            f"the policy server at {base_url} rejected the request (HTTP {status}): {_server_message(error)}"
        )
    if isinstance(error, openai.APIResponseValidationError):
        return PolicyError(f"malformed reply from {base_url}: {_one_line(error.message)}")
    return PolicyError(f"the policy server at {base_url} failed: {_one_line(str(error))}")


SERVER_CONTEXT_REMEDY = "serve the model with a larger --max-model-len"

# What vLLM (and OpenAI) answer, with HTTP 400, to a request too long for the context:
#   "max_completion_tokens=1500 cannot be greater than max_model_len=512. ..."        (vLLM 0.32)
#   "This model's maximum context length is 512 tokens. However, your prompt contains at
#    least 513 input tokens, ..."                                                     (vLLM 0.32)
#   "This model's maximum context length is 512 tokens. However, you requested 1600 tokens
#    (100 in the messages, 1500 in the completion). ..."                              (OpenAI, older vLLM)
#   "... your request has 11 input tokens (1500 > 512 - 11)"                          (older vLLM)
#   "The decoder prompt (length 600) is longer than the maximum model length of 512"  (vLLM offline)
_CONTEXT_LIMIT = re.compile(
    r"maximum context length is (\d+)|max_model_len=(\d+)|maximum model length of (\d+)", re.IGNORECASE
)
_PROMPT_SIZE = re.compile(
    r"(\d+) input tokens|\((\d+) in the messages|prompt \(length (\d+)\)", re.IGNORECASE
)


def overflow_from_message(
    message: str, *, model: str, at: str, max_tokens: int, remedy: str = SERVER_CONTEXT_REMEDY
) -> ContextOverflowError | None:
    """The :class:`ContextOverflowError` a server's (or vLLM's) error text describes, or None
    when it is about something else."""
    limit = _CONTEXT_LIMIT.search(message)
    if limit is None:
        return None
    window = chat.ContextWindow(int(next(g for g in limit.groups() if g)), model, at, remedy)
    size = _PROMPT_SIZE.search(message)
    prompt_tokens = int(next(g for g in size.groups() if g)) if size else None
    return ContextOverflowError(window, prompt_tokens=prompt_tokens, max_tokens=max_tokens)


class OpenAICompatPolicy(chat.ChatPolicy):
    """Chat completions from an OpenAI-compatible server (``vllm serve``, or any other).

    Nothing is contacted until the first call; :meth:`wait_until_ready` polls ``/models``
    for servers that are still starting.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        timeout_s: float = 60.0,
        max_retries: int = 2,
        extra_body: Mapping[str, Any] | None = None,
        name: str | None = None,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise PolicyError(f"the policy server URL must start with http:// or https://, got {base_url!r}")
        if not model:
            raise PolicyError("OpenAICompatPolicy needs the served model name")
        if not timeout_s > 0:
            raise PolicyError(f"timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise PolicyError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.extra_body = dict(extra_body or {})
        self.name = name or f"openai:{self.base_url}?model={model}"
        # the client only opens connections when a request is made
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=api_key, timeout=self.timeout_s, max_retries=self.max_retries
        )
        self._window: chat.ContextWindow | None = None
        self._window_asked = False
        self._tokenize_missing = False

    def _generate(self, request: chat.ChatRequest) -> chat.Completion:
        messages, images, params, on_text = request.messages, request.images, request.params, request.on_text
        # vLLM 0.32's server lists the sampled token first among the top logprobs, so at
        # temperature > 0 the k-th best goes missing when it was not sampled; one more than
        # asked, ranked and cut, is the true top k (docs/vllm.md).
        top = params.top_logprobs
        asked = top + 1 if params.temperature > 0 and 0 < top < MAX_TOP_LOGPROBS else top
        payload = build_chat_request(
            messages,
            images,
            model=self.model,
            params=replace(params, top_logprobs=asked),
            extra_body=self.extra_body,
            tools=request.tools,
            tool_choice=request.tool_choice,
        )
        started = time.perf_counter()
        try:
            if on_text is None:
                raw = self._client.chat.completions.with_raw_response.create(**payload)
            else:
                stream = self._client.chat.completions.create(
                    **payload, stream=True, stream_options={"include_usage": True}
                )
        except openai.OpenAIError as error:
            if isinstance(error, openai.BadRequestError):
                overflow = overflow_from_message(
                    _server_message(error), model=self.model, at=self.base_url, max_tokens=params.max_tokens
                )
                if overflow is not None:
                    raise self._counted(overflow, request) from error
            raise self._error(error) from error
        if on_text is None:
            response = parse_chat_body(raw.text, self.base_url)
        else:
            response = self._read_stream(stream, on_text)
        latency = time.perf_counter() - started
        return completion_from_response(
            response, latency, source=self.base_url, top_logprobs=top if top else None
        )

    def _counted(self, overflow: ContextOverflowError, request: chat.ChatRequest) -> ContextOverflowError:
        """The overflow with the prompt's exact size (the tools' listing included): vLLM 0.32
        says only "at least N" (and N is one past the context)."""
        if overflow.prompt_tokens is None:
            return overflow
        try:
            exact = self.count_tokens(
                request.messages, request.images, wire_tools(request.tools, request.tool_choice)
            )
        except PolicyError:
            exact = None
        if exact is None:
            return overflow
        return ContextOverflowError(overflow.window, prompt_tokens=exact, max_tokens=overflow.max_tokens)

    def _read_stream(self, stream: Any, on_text: Callable[[str], None]) -> ChatCompletion:
        # The reply has begun: a failure now is the server going away mid-reply (the SDK
        # raises APIConnectionError for a body cut short) or a garbled event.
        try:
            with stream:
                return collect_stream(stream, on_text)
        except openai.APIConnectionError as error:
            cause = _one_line(str(error)) or type(error).__name__
            raise PolicyError(f"the reply stream from {self.base_url} broke off: {cause}") from error
        except (ValueError, openai.APIError) as error:  # undecodable JSON in an event, an error event
            cause = _one_line(str(error))
            raise PolicyError(f"malformed reply stream from {self.base_url}: {cause}") from error

    def _error(
        self, error: openai.OpenAIError, url: str | None = None, retries: int | None = None
    ) -> PolicyError:
        """``error`` as one line naming ``url`` (default: the server), this policy's timeout and
        its retries (or ``retries`` when a call was not retried)."""
        return policy_error_from_openai(
            error,
            self.base_url if url is None else url,
            timeout_s=self.timeout_s,
            retries=self.max_retries if retries is None else retries,
        )

    def context_window(self) -> chat.ContextWindow | None:
        """The served model's context, from the ``max_model_len`` vLLM lists for it under
        ``GET /models`` (asked once); None when the server does not say (OpenAI's API does not)."""
        if not self._window_asked:
            try:
                page = self._client.models.list()
            except openai.APIConnectionError as error:
                raise self._error(error) from error
            except openai.OpenAIError as error:
                logger.info("%s answered GET /models with %s: context unknown", self.base_url, error)
                page = None
            listed = next((m for m in page.data if m.id == self.model), None) if page else None
            tokens = (listed.model_extra or {}).get("max_model_len") if listed else None
            if isinstance(tokens, int) and tokens > 0:
                self._window = chat.ContextWindow(tokens, self.model, self.base_url, SERVER_CONTEXT_REMEDY)
            else:
                logger.info("%s does not say how long %s's context is", self.base_url, self.model)
            self._window_asked = True
        return self._window

    def _count_tokens(
        self, messages: Sequence[chat.Message], images: chat.Images, tools: chat.Tools
    ) -> int | None:
        """Tokens of the chat prompt, from vLLM's ``POST /tokenize`` (the server's own chat
        template and tokenizer, generation prompt and the tools' listing included). None when
        the server has no such endpoint (any OpenAI-compatible server but vLLM's); that is
        logged once."""
        if self._tokenize_missing:
            return None
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(messages, images),
            "add_generation_prompt": True,
        }
        if tools:
            payload["tools"] = [dict(tool) for tool in tools]
        root = self.base_url.removesuffix("/v1")
        try:
            answer = self._client.post(f"{root}/tokenize", cast_to=object, body=payload)
        except (openai.NotFoundError, openai.PermissionDeniedError) as error:
            logger.warning(
                "%s has no /tokenize endpoint (HTTP %s): prompts are not counted in tokens",
                root,
                error.status_code,
            )
            self._tokenize_missing = True
            return None
        except openai.APIStatusError as error:
            if error.status_code == 405:  # a server routing every POST elsewhere
                self._tokenize_missing = True
                return None
            raise self._error(error, root, retries=0) from error
        except openai.OpenAIError as error:
            raise self._error(error, root) from error
        count = answer.get("count") if isinstance(answer, dict) else None
        if not isinstance(count, int):
            raise PolicyError(f"malformed reply from {root}/tokenize: no token count")
        return count

    def models(self) -> list[str]:
        """The model names the server serves (``GET /models``)."""
        try:
            page = self._client.models.list()
        except openai.OpenAIError as error:
            raise self._error(error) from error
        return [m.id for m in page.data]

    def check_reachable(self) -> None:
        """Raise PolicyError naming the server unless it answers ``GET /models`` at all (with this
        policy's timeout and retries). Runs call it before they start, so a server that is down
        fails the run at once instead of turning every decision into a fallback. Any HTTP answer,
        even an error status, counts: the server is there, and its requests will say the rest."""
        try:
            page = self._client.models.list()
        except openai.APIConnectionError as error:  # refused, unresolvable, timed out
            raise self._error(error) from error
        except openai.OpenAIError as error:
            logger.debug("policy server at %s answered GET /models with %s", self.base_url, error)
            return
        self._label_random_weights(page.data)

    def _label_random_weights(self, served: Sequence[Any]) -> None:
        """Warn and label this policy's name when the server serves embodia's tiny random-weight
        model: vLLM lists the folder it loaded as the model's ``root``, readable when the server
        runs on this machine."""
        listed = next((m for m in served if m.id == self.model), None)
        root = (listed.model_extra or {}).get("root") if listed is not None else None
        note = random_weights_note(root) if isinstance(root, str) and root else None
        if note is not None and self.random_weights is None:
            self._mark_random_weights(f"{self.model} at {self.base_url}: {note}")

    def wait_until_ready(self, timeout_s: float = 120.0, poll_s: float = 0.5) -> list[str]:
        """Poll ``GET /models`` until the server answers and serves this model; returns its models.

        Connection errors, timeouts and 5xx mean "still starting"; any other HTTP error, or a
        server that answers without this model, raises at once.
        """
        deadline = time.monotonic() + timeout_s
        last_problem = "no answer yet"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PolicyError(
                    f"the policy server at {self.base_url} was not ready within {timeout_s:g} s: "
                    f"{last_problem}"
                )
            client = self._client.with_options(
                max_retries=0, timeout=max(0.1, min(self.timeout_s, remaining))
            )
            try:
                served = [m.id for m in client.models.list().data]
            except (openai.APIConnectionError, openai.InternalServerError) as error:
                last_problem = str(
                    policy_error_from_openai(error, self.base_url, timeout_s=remaining, retries=0)
                )
                time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
                continue
            except openai.OpenAIError as error:
                raise self._error(error, retries=0) from error
            if self.model not in served:
                raise PolicyError(
                    f"the policy server at {self.base_url} serves {', '.join(served) or 'no models'}, "
                    f"not {self.model!r}"
                )
            logger.info("policy server at %s is ready (%s)", self.base_url, ", ".join(served))
            return served

    def check_accepts_images(self, needed_by: str) -> None:
        """PolicyError (see :func:`~embodia.core.chat.require_images`) unless the served
        model takes images: one request with a small grey picture and a one-token reply.

        vLLM answers an image sent to a text-only model with HTTP 400 "<model> is not a
        multimodal model" (and "At most 0 image(s) ..." where images are switched off); any
        other refusal of the probe is reported with the server's own words, as the run's
        requests with pictures would get the same answer.
        """
        probe = np.full((PROBE_SIDE, PROBE_SIDE, 3), 128, dtype=np.uint8)
        request = build_chat_request(
            [{"role": "user", "content": "What colour is this picture?"}],
            [probe],
            model=self.model,
            params=chat.SamplingParams(max_tokens=1),
            extra_body=self.extra_body,
        )
        try:
            self._client.chat.completions.create(**request)
        except openai.BadRequestError as error:
            said = _server_message(error)
            if TEXT_ONLY_REPLY.search(said):
                raise chat.text_only_model(self.name, f"the server says: {said}", needed_by) from error
            raise PolicyError(
                f"the policy server at {self.base_url} refused a request with one {PROBE_SIDE}x{PROBE_SIDE} "
                f"image (HTTP 400): {said}; {needed_by} works from pictures"
            ) from error
        except openai.OpenAIError as error:
            raise self._error(error) from error
