"""A policy that runs a model in-process with vLLM's offline ``vllm.LLM`` (the ``[vllm]`` extra).

vLLM pins exact torch and transformers versions, so it lives in its own environment
(``make test-vllm`` builds ``.venv-vllm``); this module imports it only when a policy is made
and turns a missing install into a :class:`PolicyError`. Messages are rendered by vLLM with
the model's chat template (``LLM.chat``); images travel as the same ``image_url`` PNG parts
the OpenAI-compatible backend sends, so both backends see one request shape.

Sampling follows the server's defaults where vLLM's offline defaults differ:
``SamplingParams.max_tokens`` defaults to 16 offline, so it is always set, and the model's
``generation_config.json`` is ignored (``generation_config="vllm"``), so a request means the
same thing here as against ``vllm serve --generation-config vllm``. A directory of random
weights (``embodia models tiny``) loads with a warning and a name that says so, as with
``HFPolicy``.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embodia.core import chat
from embodia.core.chat import ContextOverflowError, PolicyError
from embodia.core.random_weights import random_weights_note
from embodia.core.tool_calls import forced_call_schema
from embodia.policies.openai_compat import overflow_from_message, wire_messages

logger = logging.getLogger(__name__)

CONTEXT_REMEDY = "load it with a larger max_model_len (vllm:DIR?max_model_len=N)"

_FINISH_REASONS: dict[str, chat.FinishReason] = {"stop": "stop", "length": "length"}


def _import_vllm() -> Any:
    # import_module, not `import vllm`: the main environment (and its type checker) has no vllm.
    try:
        return importlib.import_module("vllm")
    except ImportError as error:
        raise PolicyError(
            f"the vllm backend needs vLLM, which is not importable here ({error}); install the "
            "[vllm] extra in its own environment (make test-vllm builds .venv-vllm)"
        ) from error


def token_logprobs(
    token_ids: Sequence[int], positions: Sequence[Mapping[int, Any] | None], top_logprobs: int
) -> tuple[chat.TokenLogprob, ...]:
    """Our per-token logprobs from vLLM's ``{token_id: Logprob}`` per generated position.

    vLLM returns the ``top_logprobs`` most likely tokens plus the sampled one when it is not
    among them; ``top`` keeps only the former, best first, as the OpenAI server does.
    """
    if len(token_ids) != len(positions):
        raise PolicyError(
            f"vLLM returned logprobs for {len(positions)} positions but {len(token_ids)} tokens"
        )
    tokens = []
    for index, (token_id, position) in enumerate(zip(token_ids, positions, strict=True)):
        if not position or token_id not in position:
            raise PolicyError(f"vLLM returned no logprob for generated token {index} (id {token_id})")
        chosen = position[token_id]
        ranked = sorted(position.values(), key=lambda entry: -float(entry.logprob))
        top = tuple(
            (str(entry.decoded_token), float(entry.logprob))
            for entry in ranked
            if entry.rank is None or entry.rank <= top_logprobs
        )[:top_logprobs]
        tokens.append(
            chat.TokenLogprob(token=str(chosen.decoded_token), logprob=float(chosen.logprob), top=top)
        )
    return tuple(tokens)


class VLLMOfflinePolicy(chat.ChatPolicy):
    """Chat completions from a local model directory through ``vllm.LLM.chat``.

    The model loads when the policy is made (tens of seconds on CPU). Calls are serialised:
    one ``LLM`` runs one batch at a time.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        max_model_len: int = 512,
        dtype: str = "float32",
        name: str | None = None,
        seed: int = 0,
        gpu_memory_utilization: float = 0.1,
        max_logprobs: int = 20,
    ) -> None:
        self.path = Path(path)
        if not (self.path / "config.json").is_file():
            raise PolicyError(f"no model directory at {self.path} (config.json is missing)")
        if max_model_len < 1:
            raise PolicyError(f"max_model_len must be at least 1, got {max_model_len}")
        self.name = name or f"vllm:{self.path}"
        self._mark_random_weights(random_weights_note(self.path))
        self.seed = int(seed)
        self.max_model_len = int(max_model_len)
        self.max_logprobs = int(max_logprobs)
        vllm = _import_vllm()
        self._sampling_params_type = vllm.SamplingParams
        self._structured_type = importlib.import_module("vllm.sampling_params").StructuredOutputsParams
        started = time.perf_counter()
        try:
            self._llm = vllm.LLM(
                model=str(self.path),
                dtype=dtype,
                max_model_len=self.max_model_len,
                seed=self.seed,
                gpu_memory_utilization=gpu_memory_utilization,
                max_logprobs=self.max_logprobs,
                generation_config="vllm",
            )
        except Exception as error:  # vLLM raises many types while building an engine
            raise PolicyError(f"vLLM could not load the model at {self.path}: {error}") from error
        logger.info("vLLM loaded %s in %.1f s", self.path, time.perf_counter() - started)
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """Stop vLLM's engine processes now rather than at interpreter exit; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # LLM has no public shutdown in 0.32; its engine client owns the processes.
            engine_core = getattr(getattr(self._llm, "llm_engine", None), "engine_core", None)
            if engine_core is not None:
                engine_core.shutdown()

    def context_window(self) -> chat.ContextWindow:
        """The engine's ``max_model_len`` (vLLM clamps each reply to the room the prompt leaves)."""
        config = getattr(getattr(self._llm, "llm_engine", None), "model_config", None)
        tokens = int(getattr(config, "max_model_len", self.max_model_len))
        return chat.ContextWindow(tokens, str(self.path), remedy=CONTEXT_REMEDY)

    def _count_tokens(
        self, messages: Sequence[chat.Message], images: chat.Images, tools: chat.Tools
    ) -> int | None:
        """Tokens of the chat prompt from the engine's tokenizer and chat template (the tools'
        listing included); None with images, whose tokens only vLLM's multimodal processor knows."""
        if images:
            return None
        try:
            ids = self._llm.get_tokenizer().apply_chat_template(
                wire_messages(messages),
                add_generation_prompt=True,
                tokenize=True,
                **chat.template_tools(tools),
            )
        except Exception as error:  # a template that refuses the conversation
            raise PolicyError(f"cannot apply {self.path}'s chat template: {error}") from error
        if isinstance(ids, Mapping):  # transformers 5 returns the encoding, not the ids
            ids = ids["input_ids"]
        return len(ids)

    def _generate(self, request: chat.ChatRequest) -> chat.Completion:
        messages, images, params, on_text = request.messages, request.images, request.params, request.on_text
        if params.top_logprobs > self.max_logprobs:
            raise PolicyError(
                f"top_logprobs {params.top_logprobs} exceeds this policy's max_logprobs {self.max_logprobs}"
            )
        # A forced call (``required``, a named tool) is decoded under its schema by vLLM's
        # structured outputs, as its server does, so a random-weight model still calls validly.
        schema = forced_call_schema(request.tools, request.tool_choice)
        structured = {} if schema is None else {"structured_outputs": self._structured_type(json=schema)}
        sampling = self._sampling_params_type(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            logprobs=params.top_logprobs if params.wants_logprobs else None,
            stop=list(params.stop) or None,
            seed=self.seed,
            **structured,
        )
        # The same wire messages as the OpenAI-compatible backend.
        conversation = wire_messages(messages, images)
        started = time.perf_counter()
        with self._lock:
            if self._closed:
                raise PolicyError(f"the vllm policy for {self.path} was closed")
            try:
                # the chat template lists the tools; the reply's markup is read by ChatPolicy
                outputs = self._llm.chat(
                    conversation, sampling, use_tqdm=False, **chat.template_tools(request.tools)
                )
            except Exception as error:  # prompt too long, bad template, engine failure
                overflow = overflow_from_message(
                    str(error),
                    model=str(self.path),
                    at="",
                    max_tokens=params.max_tokens,
                    remedy=CONTEXT_REMEDY,
                )
                if overflow is not None and overflow.prompt_tokens is not None and not images:
                    # vLLM says "at least N": the prompt's own size is the tokenizer's count
                    exact = self.count_tokens(messages, tools=request.tools)
                    overflow = ContextOverflowError(
                        overflow.window, prompt_tokens=exact, max_tokens=params.max_tokens
                    )
                if overflow is not None:
                    raise overflow from error
                raise PolicyError(f"vLLM failed on {self.path}: {error}") from error
        latency = time.perf_counter() - started
        if len(outputs) != 1 or not outputs[0].outputs:
            raise PolicyError(f"vLLM returned {len(outputs)} results for one conversation")
        result = outputs[0]
        output = result.outputs[0]
        token_ids = list(output.token_ids)
        tokens: tuple[chat.TokenLogprob, ...] = ()
        if params.wants_logprobs:
            tokens = token_logprobs(token_ids, list(output.logprobs or ()), params.top_logprobs)
        raw_finish = str(output.finish_reason) if output.finish_reason is not None else None
        extra: dict[str, object] = {"token_ids": token_ids}
        if output.stop_reason is not None:
            extra["stop_reason"] = output.stop_reason
        if raw_finish not in _FINISH_REASONS:
            extra["finish_reason"] = raw_finish
        # One piece: vLLM 0.32's LLM sets every request to RequestOutputKind.FINAL_ONLY
        # (_add_request in entrypoints/common/offline.py), so nothing partial comes out.
        if on_text is not None and output.text:
            on_text(output.text)
        return chat.Completion(
            text=output.text,
            finish_reason=_FINISH_REASONS.get(raw_finish or "", "error"),
            prompt_tokens=len(result.prompt_token_ids or ()),
            completion_tokens=len(token_ids),
            latency_s=latency,
            tokens=tokens,
            model=self.name,
            extra=extra,
        )

    def check_accepts_images(self, needed_by: str) -> None:
        """PolicyError (see :func:`~embodia.core.chat.require_images`) unless vLLM loaded
        the model with a multimodal part that takes images (a text-only architecture has no
        multimodal config; ``limit_mm_per_prompt`` may switch images off)."""
        model_config = self._llm.model_config
        multimodal = model_config.multimodal_config
        if multimodal is not None and multimodal.get_limit_per_prompt("image") > 0:
            return
        architectures = ", ".join(getattr(model_config.hf_config, "architectures", None) or ["?"])
        evidence = (
            f"vLLM loads {self.path} ({architectures}) as a text-only model"
            if multimodal is None
            else f"vLLM loads {self.path} ({architectures}) with images switched off"
        )
        raise chat.text_only_model(self.name, evidence, needed_by)
