"""A local ``transformers`` backend: any chat LM or VLM saved in a directory.

The directory's ``config.json`` decides the architecture. A directory with a processor
(``processor_config.json`` or ``preprocessor_config.json``) whose architecture is an
image-text-to-text model is loaded as a VLM (``AutoProcessor`` +
``AutoModelForImageTextToText``); anything else must be a causal LM (``AutoTokenizer`` +
``AutoModelForCausalLM``). Nothing is ever downloaded (``local_files_only=True``). A directory
of random weights (``embodia models tiny``) loads with a warning, and the policy's name says
``(random weights)``, so that every record of its replies does.

Decoding: greedy at temperature 0; above it, one token is drawn per step from
``softmax(logits / temperature)`` with this policy's seeded ``torch.Generator`` (so a run is
reproducible from the policy's seed), after the model's own logits processors (e.g. the
repetition penalty from its ``generation_config``). Reported logprobs are the model's
distribution, ``log_softmax`` of the raw logits at each step, before any processor or
temperature, which is what vLLM reports by default too.

Early exit (``exit_threshold``): a causal LM of the Llama family can decode greedily leaving the
decoder at the first layer (from ``exit_min_layer`` on) whose logit-lens top probability reaches
the threshold (:func:`embodia.policies.early_exit.early_exit_generate`); the completion's
``extra`` says what share of the layers its tokens used. Such a policy serves greedy, text-only
requests without logprobs or a forced tool call, and refuses the others by name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from PIL import Image
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    StoppingCriteria,
    StoppingCriteriaList,
    TextStreamer,
)
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING,
    MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING,
)

from embodia.core import chat
from embodia.core.chat import ContextOverflowError, PolicyError
from embodia.core.random_weights import random_weights_note
from embodia.core.tool_calls import forced_call_schema
from embodia.policies.constrained import GrammarTokenizer, SchemaConstraint

logger = logging.getLogger(__name__)

PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")
"""Any of these beside ``config.json`` means the directory has a tokenizer."""
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class SeededSampler(LogitsProcessor):
    """Draws the next token from softmax(scores / T) with a given generator.

    ``generate`` samples with the global RNG; doing the draw here (and decoding greedily
    over the one-hot result) keeps sampling on the policy's own generator.
    """

    def __init__(self, temperature: float, generator: torch.Generator) -> None:
        self.temperature = temperature
        self.generator = generator

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        probabilities = torch.softmax(scores.float() / self.temperature, dim=-1)
        chosen = torch.multinomial(probabilities, num_samples=1, generator=self.generator)
        only_chosen = torch.full_like(scores, -float("inf"))
        only_chosen.scatter_(1, chosen, 0.0)
        return only_chosen  # type: ignore[return-value]


class _Streamer(TextStreamer):
    """Decoded text of the completion as ``generate`` produces it, into a :class:`TextStream`
    (which cuts at stop strings, as the returned text is cut)."""

    def __init__(self, tokenizer: Any, stream: chat.TextStream) -> None:
        super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
        self.stream = stream

    def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
        self.stream.feed(text)
        if stream_end:
            self.stream.close()


class _StopOnText(StoppingCriteria):
    """Stops once the decoded completion contains any of the stop strings."""

    def __init__(self, tokenizer: Any, stops: Sequence[str], prompt_length: int) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.prompt_length = prompt_length

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any
    ) -> torch.BoolTensor:
        done = [
            _first_stop(
                self.tokenizer.decode(row[self.prompt_length :], skip_special_tokens=True), self.stops
            )
            is not None
            for row in input_ids
        ]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index where the earliest stop string starts in ``text``, or None."""
    found = [index for index in (text.find(stop) for stop in stops) if index >= 0]
    return min(found) if found else None


def _resolve_device(device: str) -> torch.device:
    try:
        resolved = torch.device(device)
    except RuntimeError as error:
        raise PolicyError(f"unknown torch device {device!r}: {error}") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise PolicyError(f"device {device!r} was asked for, but CUDA is not available to this torch")
    return resolved


def model_context_length(config: Any, tokenizer: Any = None) -> int | None:
    """How many positions a transformers model takes: its (text) config's
    ``max_position_embeddings`` (a VLM keeps it in ``text_config``), else ``n_positions``
    (GPT-2 style), else the tokenizer's ``model_max_length`` when that is a real number
    (transformers puts 1e30 there when a tokenizer does not say)."""
    text_config = config.get_text_config()
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(text_config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 10**7:
        return limit
    return None


class HFPolicy(chat.ChatPolicy):
    """A chat LM or VLM from a local directory, run with ``transformers``; see the module docstring."""

    def __init__(
        self,
        path: Path | str,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        max_new_tokens_cap: int = 1024,
        name: str | None = None,
        seed: int = 0,
        exit_threshold: float | None = None,
        exit_min_layer: int = 1,
    ) -> None:
        self.path = Path(path)
        if exit_threshold is not None and not 0 <= exit_threshold <= 1:
            raise PolicyError(f"exit_threshold is a probability in [0, 1], got {exit_threshold}")
        self.exit_threshold = exit_threshold
        self.exit_min_layer = exit_min_layer
        self.name = name or f"hf:{self.path}"
        if max_new_tokens_cap < 1:
            raise PolicyError(f"max_new_tokens_cap must be at least 1, got {max_new_tokens_cap}")
        self.max_new_tokens_cap = max_new_tokens_cap
        if dtype not in DTYPES:
            raise PolicyError(f"unknown dtype {dtype!r}: {' | '.join(DTYPES)}")
        self.device = _resolve_device(device)

        if not self.path.is_dir():
            raise PolicyError(f"model directory {self.path} does not exist")
        if not (self.path / "config.json").is_file():
            raise PolicyError(f"{self.path} has no config.json: not a transformers model directory")
        self._mark_random_weights(random_weights_note(self.path))
        try:
            config = AutoConfig.from_pretrained(self.path, local_files_only=True)
        except (OSError, ValueError, KeyError) as error:
            raise PolicyError(f"cannot read the model config in {self.path}: {error}") from error

        has_processor = any((self.path / file).is_file() for file in PROCESSOR_FILES)
        is_image_text = type(config) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING
        is_causal_lm = type(config) in MODEL_FOR_CAUSAL_LM_MAPPING
        if (is_image_text or is_causal_lm) and not any((self.path / f).is_file() for f in TOKENIZER_FILES):
            raise PolicyError(
                f"{self.path} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}): "
                "save the tokenizer (or processor) into the model directory"
            )
        model_class: Any
        try:
            if has_processor and is_image_text:
                self.processor: Any = AutoProcessor.from_pretrained(self.path, local_files_only=True)
                self.tokenizer: Any = self.processor.tokenizer
                model_class = AutoModelForImageTextToText
            elif is_causal_lm:
                self.processor = None
                self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
                model_class = AutoModelForCausalLM
            elif is_image_text:
                raise PolicyError(
                    f"{self.path} holds a {config.model_type} vision-language model but no processor "
                    f"config ({' or '.join(PROCESSOR_FILES)})"
                )
            else:
                raise PolicyError(
                    f"{self.path} holds a {config.model_type} model, which is neither a causal LM "
                    "nor an image-text-to-text model"
                )
        except (OSError, ValueError, ImportError) as error:
            raise PolicyError(f"cannot load the tokenizer/processor in {self.path}: {error}") from error

        template_owner = self.processor if self.processor is not None else self.tokenizer
        if not getattr(template_owner, "chat_template", None):
            raise PolicyError(f"{self.path} has no chat template, so chat messages cannot be formatted")
        self._template_owner = template_owner
        self.accepts_images = getattr(self.processor, "image_processor", None) is not None

        try:
            model = model_class.from_pretrained(self.path, local_files_only=True, dtype=DTYPES[dtype])
        except (OSError, ValueError) as error:
            raise PolicyError(f"cannot load the model weights in {self.path}: {error}") from error
        self.model: PreTrainedModel = model.to(self.device).eval()

        generation_config = self.model.generation_config
        eos = generation_config.eos_token_id if generation_config is not None else None
        eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        if not eos_ids:
            raise PolicyError(
                f"{self.path} declares no end-of-sequence token (generation_config or tokenizer)"
            )
        self.eos_token_ids = sorted(eos_ids)
        pad = generation_config.pad_token_id if generation_config is not None else None
        self.pad_token_id = pad if pad is not None else self.tokenizer.pad_token_id or self.eos_token_ids[0]
        self.context_length = model_context_length(config, self.tokenizer)
        self._generator = torch.Generator(device=self.device).manual_seed(seed)
        self._grammar: GrammarTokenizer | None = None
        logger.info(
            "loaded %s (%s, %s) on %s",
            self.path,
            config.model_type,
            "VLM" if self.accepts_images else "LM",
            device,
        )

    def _generate(self, request: chat.ChatRequest) -> chat.Completion:
        messages, images, params, on_text = request.messages, request.images, request.params, request.on_text
        started = time.perf_counter()
        self._check_images(images)
        if params.top_logprobs and not params.logprobs:
            raise PolicyError("top_logprobs needs logprobs=True")
        stops = [s for s in params.stop if s]

        inputs = self._encode(messages, images, tools=request.tools)
        prompt_length = int(inputs["input_ids"].shape[1])
        max_new_tokens = min(params.max_tokens, self.max_new_tokens_cap)
        window = self.context_window()
        if window is not None:
            # Past its positions the model still generates, but garbage: refuse instead.
            room = window.tokens - prompt_length
            if room < 1:
                raise ContextOverflowError(window, prompt_tokens=prompt_length, max_tokens=params.max_tokens)
            max_new_tokens = min(max_new_tokens, room)
        if max_new_tokens < params.max_tokens:
            logger.info("max_tokens %d capped to %d for %s", params.max_tokens, max_new_tokens, self.name)

        logits_processor = LogitsProcessorList()
        schema = forced_call_schema(request.tools, request.tool_choice)
        if schema is not None:  # before sampling: a forced call is decoded under its schema
            logits_processor.append(SchemaConstraint(self._grammar_tokenizer(), schema))
        if params.temperature > 0:
            logits_processor.append(SeededSampler(params.temperature, self._generator))
        stopping_criteria = StoppingCriteriaList()
        if stops:
            stopping_criteria.append(_StopOnText(self.tokenizer, stops, prompt_length))
        if self.exit_threshold is not None:
            return self._generate_exiting(request, inputs, max_new_tokens, schema is not None, started)
        with torch.inference_mode():
            output = self.model.generate(  # type: ignore[operator]
                **inputs,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                logits_processor=logits_processor,
                stopping_criteria=stopping_criteria,
                eos_token_id=self.eos_token_ids,
                pad_token_id=self.pad_token_id,
                return_dict_in_generate=True,
                output_logits=params.logprobs,
                streamer=None
                if on_text is None
                else _Streamer(self.tokenizer, chat.TextStream(on_text, stops)),
            )
        completion_ids = output.sequences[0, prompt_length:].tolist()
        tokens: tuple[chat.TokenLogprob, ...] = ()
        if params.logprobs:
            tokens = self._token_logprobs(completion_ids, output.logits, params.top_logprobs)
        return self._completion(request, completion_ids, prompt_length, max_new_tokens, started, tokens)

    def _completion(
        self,
        request: chat.ChatRequest,
        completion_ids: list[int],
        prompt_length: int,
        max_new_tokens: int,
        started: float,
        tokens: tuple[chat.TokenLogprob, ...] = (),
        **extra: Any,
    ) -> chat.Completion:
        stops = [s for s in request.params.stop if s]
        text = self.tokenizer.decode(completion_ids, skip_special_tokens=True)
        finish_reason: chat.FinishReason = "length"
        stop_at = _first_stop(text, stops)
        if stop_at is not None:
            text, finish_reason = text[:stop_at], "stop"
        elif completion_ids and completion_ids[-1] in self.eos_token_ids:
            finish_reason = "stop"
        return chat.Completion(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=prompt_length,
            completion_tokens=len(completion_ids),
            latency_s=time.perf_counter() - started,
            tokens=tokens,
            model=self.name,
            extra={"completion_token_ids": completion_ids, "max_new_tokens": max_new_tokens, **extra},
        )

    def _generate_exiting(
        self, request: chat.ChatRequest, inputs: Any, max_new_tokens: int, forced_call: bool, started: float
    ) -> chat.Completion:
        """Early-exit decoding (module docstring) of a request it can serve."""
        from embodia.policies.early_exit import EarlyExitError, early_exit_generate

        params = request.params
        refused = [
            reason
            for reason, applies in (
                (f"temperature {params.temperature} (it decodes greedily)", params.temperature > 0),
                ("images", bool(request.images)),
                ("logprobs", params.logprobs),
                ("a forced tool call", forced_call),
                ("streaming", request.on_text is not None),
            )
            if applies
        ]
        if refused:
            raise PolicyError(f"{self.name} decodes with early exit, which cannot serve {', '.join(refused)}")
        prompt_length = int(inputs["input_ids"].shape[1])
        try:
            decoded = early_exit_generate(
                self.model,
                inputs["input_ids"],
                threshold=float(self.exit_threshold or 0.0),
                min_layer=self.exit_min_layer,
                max_new_tokens=max_new_tokens,
                stop_ids=self.eos_token_ids,
            )
        except EarlyExitError as error:
            raise PolicyError(f"{self.name}: {error}") from error
        return self._completion(
            request,
            decoded.token_ids,
            prompt_length,
            max_new_tokens,
            started,
            layer_share=decoded.layer_share,
        )

    def _grammar_tokenizer(self) -> GrammarTokenizer:
        """The tokenizer as the grammar engine reads it, built on first use."""
        if self._grammar is None:
            vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
            self._grammar = GrammarTokenizer(self.tokenizer, vocab_size, self.eos_token_ids)
        return self._grammar

    def context_window(self) -> chat.ContextWindow | None:
        """The positions the model was built for (see :func:`model_context_length`)."""
        if self.context_length is None:
            return None
        return chat.ContextWindow(self.context_length, str(self.path))

    def _count_tokens(self, messages: Sequence[chat.Message], images: chat.Images, tools: chat.Tools) -> int:
        """Tokens of the chat prompt as :meth:`complete` would feed it (template, generation
        prompt, the tools' listing and each image's tokens included)."""
        self._check_images(images)
        return int(self._encode(messages, images, tools=tools, to_device=False)["input_ids"].shape[1])

    def _check_images(self, images: Sequence[NDArray[np.uint8]]) -> None:
        if images and not self.accepts_images:
            raise PolicyError(
                f"{self.name} is a text-only model: it cannot take the {len(images)} image(s) given"
            )

    def _encode(
        self,
        messages: Sequence[chat.Message],
        images: Sequence[NDArray[np.uint8]],
        *,
        tools: chat.Tools = (),
        to_device: bool = True,
    ) -> dict[str, Any]:
        """The chat-templated prompt as model inputs, images attached to the last user message;
        ``tools`` go to the template, which lists them (the model writes its calls as the
        template teaches, and :meth:`ChatPolicy.complete` reads them)."""
        template_tools = chat.template_tools(tools)
        if self.processor is None:
            prompt = self.tokenizer.apply_chat_template(
                [dict(m) for m in messages], add_generation_prompt=True, tokenize=False, **template_tools
            )
            encoded = self.tokenizer(
                prompt, return_tensors="pt", add_special_tokens=False, return_token_type_ids=False
            )
        else:
            # VLM templates iterate content parts, so every message is given in the part form.
            last_user = max(i for i, m in enumerate(messages) if m["role"] == "user") if images else -1
            conversation = []
            for i, message in enumerate(messages):
                parts: list[dict[str, str]] = [{"type": "image"} for _ in images] if i == last_user else []
                parts.append({"type": "text", "text": message["content"]})
                turn: dict[str, Any] = {**message, "content": parts}
                conversation.append(turn)
            prompt = self.processor.apply_chat_template(
                conversation, add_generation_prompt=True, tokenize=False, **template_tools
            )
            pil_images = [Image.fromarray(np.ascontiguousarray(image)) for image in images]
            encoded = self.processor(
                text=[prompt], images=pil_images or None, return_tensors="pt", add_special_tokens=False
            )
        if not to_device:
            return dict(encoded)
        return {key: value.to(self.device) for key, value in encoded.items()}

    def _token_logprobs(
        self, completion_ids: list[int], step_logits: Sequence[torch.Tensor], top_logprobs: int
    ) -> tuple[chat.TokenLogprob, ...]:
        tokens = []
        for token_id, logits in zip(completion_ids, step_logits, strict=True):
            distribution = torch.log_softmax(logits[0].float(), dim=-1)
            top: tuple[tuple[str, float], ...] = ()
            if top_logprobs:
                values, indices = torch.topk(distribution, k=min(top_logprobs, distribution.shape[-1]))
                top = tuple(
                    (self.tokenizer.decode([int(i)]), float(v)) for v, i in zip(values, indices, strict=True)
                )
            tokens.append(
                chat.TokenLogprob(
                    token=self.tokenizer.decode([token_id]), logprob=float(distribution[token_id]), top=top
                )
            )
        return tuple(tokens)

    def check_accepts_images(self, needed_by: str) -> None:
        """PolicyError (see :func:`~embodia.core.chat.require_images`) unless the directory
        was loaded as a VLM: an image-text-to-text model with an image processor."""
        if self.accepts_images:
            return
        model_type = getattr(self.model.config, "model_type", "transformers")
        if self.processor is None:
            evidence = f"{self.path} holds a {model_type} language model and no image processor"
        else:
            evidence = f"the processor in {self.path} has no image processor"
        raise chat.text_only_model(self.name, evidence, needed_by)
