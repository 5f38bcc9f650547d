"""Tiny random-weight models built from configs, for trying every model path of embodia offline.

``embodia models tiny chat|vlm|nli --out DIR`` builds them (``docs/models.md``), and the tests
build the same ones. Nothing is downloaded: the tokenizer is a byte-level BPE trained here with
``tokenizers`` on a corpus this module generates, and the models are toy-size configs with
random weights saved with ``save_pretrained``, so every loading path (``from_pretrained`` with
``local_files_only=True``, chat templates, processors, a vLLM server) runs for real.

**The weights are random**: what these models write is noise. They show that a path works,
never how well anything works. A build says so in three places: its model card
(``README.md``), its marker file (:data:`BUILD_MARKER`, ``"random_weights": true``) and
:func:`random_weights_note`, with which the model backends warn when they load one and label
the policy's name ``... (random weights)``, so that run records say it too.

- ``chat`` (:func:`build_tiny_chat_lm`): a Qwen2 causal LM. Its attention head_dim is 64
  because vLLM's CPU attention only accepts 32/64/128; the vLLM suite serves this directory.
- ``vlm`` (:func:`build_tiny_vlm`): a LLaVA (a CLIP vision tower and a Qwen2 decoder). Its
  processor pairs the tokenizer with the PIL-based ``CLIPImageProcessorPil``, because
  torchvision does not load beside the CPU torch.
- ``nli`` (:func:`build_tiny_nli`): a BERT sequence classifier with NLI labels.

A build is written into a hidden folder beside its target and renamed into place once it is
complete (marker last), so the target is either a finished build or untouched. Building again
with the same kind, seed and context is a no-op. torch and transformers are imported only to
build, so checking a directory for random weights stays cheap.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embodia.core.limits import check_range, check_seed
from embodia.core.random_weights import (
    BUILD_MARKER,
    TRAINED_BY,
    read_marker,
)
from embodia.errors import EmbodiaError

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedTokenizerFast

MODEL_CARD = "README.md"
KINDS = ("chat", "vlm", "nli")
WHAT = {"chat": "chat LM", "vlm": "vision-language model", "nli": "NLI classifier"}
DEFAULT_CONTEXT = {"chat": 4096, "vlm": 4096, "nli": 128}
"""Positions (max_position_embeddings, and the tokenizer's model_max_length) per kind. The NLI
classifier keeps BERT-style learned positions, so it stays small."""
MIN_CONTEXT, MAX_CONTEXT = 64, 131_072
VOCAB_SIZE = 1280

END_OF_TEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"
IMAGE_PAD = "<|image_pad|>"
VIDEO_PAD = "<|video_pad|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END, VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD)

# Qwen2-style ChatML. Content is either a string or a list of {"type": "image"} /
# {"type": "text", "text": ...} parts (the processor's structured form); an image part becomes
# <|vision_start|><|image_pad|><|vision_end|>, and the processor repeats the pad token once per
# merged patch. With ``tools``, the system turn lists them as JSON inside <tools></tools> and
# says how to call one; an assistant's calls are written as Hermes <tool_call> blocks and a
# tool's result comes back as a user turn inside <tool_response></tool_response>, the markup
# that embodia's parser (core/tool_calls.py) and vLLM's hermes parser read.
CHAT_TEMPLATE = (
    "{%- macro render(content) -%}"
    "{%- if content is string -%}"
    "{{- content -}}"
    "{%- else -%}"
    "{%- for part in content -%}"
    "{%- if part['type'] == 'image' -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}"
    "{{- part['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{%- set skip_first = false -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{{- render(messages[0]['content']) + '\\n\\n' -}}"
    "{%- set skip_first = true -%}"
    "{%- endif -%}"
    "{{- 'You can call these tools, each described as a JSON function signature:\\n<tools>' -}}"
    "{%- for tool in tools -%}"
    "{{- '\\n' + (tool | tojson) -}}"
    "{%- endfor -%}"
    "{{- '\\n</tools>\\nTo call one, reply with a JSON object holding its name and arguments "
    'between tags:\\n<tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call><|im_end|>\\n\' -}}'
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if not (loop.first and skip_first) -%}"
    "{%- if message['role'] == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + render(message['content']) -}}"
    "{{- '\\n</tool_response><|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + render(message['content']) -}}"
    "{%- for call in message.get('tool_calls') or [] -%}"
    "{%- set arguments = call['function']['arguments'] -%}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + call['function']['name'] + '\", \"arguments\": ' -}}"
    "{{- (arguments if arguments is string else (arguments | tojson)) + '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)


# --------------------------------------------------------------------------- the tokenizer

_ROOMS = (
    "kitchen",
    "bedroom",
    "bathroom",
    "living room",
    "office",
    "hallway",
    "garage",
    "dining room",
    "corridor",
    "laundry",
    "attic",
    "basement",
    "balcony",
    "closet",
    "staircase",
    "entrance",
)
_OBJECTS = (
    "table",
    "chair",
    "sofa",
    "bed",
    "sink",
    "door",
    "window",
    "plant",
    "lamp",
    "shelf",
    "toilet",
    "bathtub",
    "oven",
    "fridge",
    "television",
    "desk",
    "cabinet",
    "mirror",
    "picture",
    "rug",
    "counter",
    "stool",
    "bench",
    "wardrobe",
    "dresser",
    "curtain",
    "pillow",
    "towel",
    "stove",
)
_COLOURS = ("red", "blue", "green", "white", "black", "wooden", "grey", "yellow", "brown", "small", "large")
_DIRECTIONS = ("left", "right", "ahead", "behind", "north", "south", "east", "west", "forward", "back")
_VERBS = ("explore", "find", "visit", "map", "search", "check", "enter", "leave", "reach", "inspect")
_ROLES = ("system", "user", "assistant")
_PROSE = (
    "The agent stands in a quiet house with open doors and long corridors.",
    "Each panorama shows walls, floors, furniture and the frontier between known and unknown space.",
    "Choose the waypoint that reveals the most unexplored area while keeping the path short.",
    "A robot should never walk through walls; obstacles block the way and doors connect rooms.",
    "Think step by step, describe what you observe, and then give your final answer as JSON.",
    "If nothing new can be seen, return to the previous region and continue the search elsewhere.",
    "Please answer with a single number between zero and ninety nine, without any extra words.",
    "The map grows as the camera moves; coverage measures how much floor has been observed.",
    "Instructions may ask to explore the bedroom first, find the kitchen, or go back to the sofa.",
    "Bright sunlight enters through tall windows, casting shadows across the carpet and tiles.",
)


def _corpus_lines(rng: random.Random, count: int = 3000) -> Iterator[str]:
    """English about rooms, numbers 0-99, JSON punctuation, "Answer:" and role names."""
    for number in range(100):
        yield f"{number} Answer: {number}"
    for role in _ROLES:
        yield f"{role}: You are a helpful {role}."
    yield from _PROSE
    for _ in range(count):
        room, obj, verb = rng.choice(_ROOMS), rng.choice(_OBJECTS), rng.choice(_VERBS)
        colour, direction = rng.choice(_COLOURS), rng.choice(_DIRECTIONS)
        number, other = rng.randrange(100), rng.randrange(100)
        yield rng.choice(
            (
                f"The {colour} {obj} is in the {room}, {number} meters {direction}.",
                f"Go to the {room} and look for the {obj}.",
                f'{{"waypoint": {number}, "room": "{room}", "object": "{obj}", "score": {other}.5}}',
                f"Which waypoint leads to the {room}? Answer: {number}",
                f"{verb.capitalize()} the {room} first, then turn {direction}.",
                f'[{number}, {other}, {rng.randrange(100)}] {{}} : , "{obj}"',
                f"{rng.choice(_ROLES)}: I see a {colour} {obj} {direction} of the {room}.",
                f"Waypoint {number} is {other} steps away; {verb} it to see the {obj}.",
                f"Why {verb} the {room}? Because the {obj} there has not been mapped yet.",
            )
        )


def train_tokenizer(
    directory: Path | str, model_max_length: int = DEFAULT_CONTEXT["chat"]
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE with ChatML special tokens and save it into ``directory``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus_lines(random.Random(0)), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=IM_END,
        pad_token=END_OF_TEXT,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in (IM_END, END_OF_TEXT)],
        chat_template=CHAT_TEMPLATE,
        model_max_length=model_max_length,
    )
    tokenizer.save_pretrained(directory)
    return tokenizer


# --------------------------------------------------------------------------- the models


def _token_id(tokenizer: PreTrainedTokenizerFast, token: str) -> int:
    found = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(found, int):
        raise TypeError(f"{token!r} is not one token of the tiny tokenizer")
    return found


CHAT_ATTENTION_HEADS = 2
"""The chat LM's default query heads (head_dim 64, which vLLM's CPU backend accepts)."""
CHAT_INITIALIZER_RANGE = 0.2
"""The chat LM's default initial weight std: large, so the random model's replies vary. A
model meant to be trained from scratch learns far sooner from a small one (0.02)."""
CHAT_SHAPE = {"attention_heads": CHAT_ATTENTION_HEADS, "initializer_range": CHAT_INITIALIZER_RANGE}
"""The chat LM's shape options at their defaults (a build records only those it changes)."""
VLM_SHAPE: dict[str, int | float] = {
    "text_layers": 2,
    "vision_layers": 1,
    "vision_hidden": 32,
    "image_side": 56,
    "vlm_initializer_range": 0.2,
}
"""The VLM's shape options at their defaults (a build records only those it changes). A model
meant to be trained from scratch to see (the hallucination study's captioner) learns far more
with a deeper decoder, a wider 2-layer vision tower on 84-pixel images and small initial
weights (0.02)."""
_VLM_LIMITS: dict[str, tuple[float, float]] = {
    "text_layers": (1, 12),
    "vision_layers": (1, 12),
    "vision_hidden": (16, 512),
    "image_side": (28, 448),
    "vlm_initializer_range": (1e-4, 1.0),
}
SHAPES: dict[str, int | float] = {**CHAT_SHAPE, **VLM_SHAPE}


def _text_config_values(tokenizer: PreTrainedTokenizerFast, context_tokens: int) -> dict[str, Any]:
    """The toy Qwen2 decoder both models share: head_dim 64 (vLLM CPU accepts 32/64/128)."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": context_tokens,
        "initializer_range": 0.2,
        "bos_token_id": _token_id(tokenizer, END_OF_TEXT),
        "eos_token_id": _token_id(tokenizer, IM_END),
        "pad_token_id": _token_id(tokenizer, END_OF_TEXT),
    }


def _generation_config(tokenizer: PreTrainedTokenizerFast) -> GenerationConfig:
    from transformers import GenerationConfig

    return GenerationConfig(
        eos_token_id=[_token_id(tokenizer, IM_END), _token_id(tokenizer, END_OF_TEXT)],
        pad_token_id=_token_id(tokenizer, END_OF_TEXT),
        bos_token_id=_token_id(tokenizer, END_OF_TEXT),
    )


def _write_chat_lm(directory: Path, seed: int, context_tokens: int, **shape: Any) -> str:
    """``shape``: the :data:`CHAT_SHAPE` options that differ from their defaults."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = train_tokenizer(directory, context_tokens)
    attention_heads = shape.get("attention_heads", CHAT_ATTENTION_HEADS)
    initializer_range = shape.get("initializer_range", CHAT_INITIALIZER_RANGE)
    values = _text_config_values(tokenizer, context_tokens)
    # Half as many key/value heads as query heads, as the default's 2 and 1.
    values |= {
        "num_attention_heads": attention_heads,
        "num_key_value_heads": attention_heads // 2,
        "initializer_range": initializer_range,
    }
    config = Qwen2Config(**values, tie_word_embeddings=False, dtype="float32")
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config = _generation_config(tokenizer)
    model.save_pretrained(directory)
    heads = "" if attention_heads == CHAT_ATTENTION_HEADS else f", {attention_heads} attention heads"
    init = "" if initializer_range == CHAT_INITIALIZER_RANGE else f", initial weights std {initializer_range}"
    return (
        f"a Qwen2 causal LM: 2 layers, hidden size 128{heads}{init}, "
        "a 1,280-token byte-level BPE with a ChatML template"
    )


def _write_vlm(directory: Path, seed: int, context_tokens: int, **shape: Any) -> str:
    """Images are resized (not cropped, so a panorama stays whole) to 56x56 pixels: 4x4 patches
    of 14 pixels, i.e. 16 image tokens per image after the CLS feature is dropped. ``shape``: the
    :data:`VLM_SHAPE` options that differ from their defaults."""
    import torch
    from transformers import CLIPImageProcessorPil, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer = train_tokenizer(directory, context_tokens)
    size = {**VLM_SHAPE, **shape}
    image_side, patch_size = int(size["image_side"]), 14
    vision_hidden = int(size["vision_hidden"])
    text = _text_config_values(tokenizer, context_tokens) | {
        "num_hidden_layers": int(size["text_layers"]),
        "initializer_range": float(size["vlm_initializer_range"]),
    }
    config = LlavaConfig(
        text_config={"model_type": "qwen2", **text, "tie_word_embeddings": False},
        vision_config={
            "model_type": "clip_vision_model",
            "hidden_size": vision_hidden,
            "intermediate_size": 2 * vision_hidden,
            "num_hidden_layers": int(size["vision_layers"]),
            "num_attention_heads": 2,
            "image_size": image_side,
            "patch_size": patch_size,
            "projection_dim": vision_hidden,
        },
        image_token_index=_token_id(tokenizer, IMAGE_PAD),
        image_seq_length=(image_side // patch_size) ** 2,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        tie_word_embeddings=False,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config = _generation_config(tokenizer)
    model.save_pretrained(directory)
    image_processor = CLIPImageProcessorPil(
        size={"height": image_side, "width": image_side}, do_center_crop=False, crop_size=None
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        image_token=IMAGE_PAD,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(directory)
    changed = {key: value for key, value in shape.items() if value != VLM_SHAPE[key]}
    init = (
        f", initial weights std {size['vlm_initializer_range']}" if "vlm_initializer_range" in changed else ""
    )
    return (
        f"a LLaVA-style VLM: a {size['vision_layers']}-layer CLIP vision tower (hidden size {vision_hidden}) "
        f"on {image_side}x{image_side}-pixel images ({(image_side // patch_size) ** 2} image tokens each) "
        f"and a {size['text_layers']}-layer Qwen2 decoder{init}, with a ChatML template that takes images"
    )


NLI_LABELS = ("contradiction", "neutral", "entailment")


def _write_nli(directory: Path, seed: int, context_tokens: int, labels: Sequence[str] = NLI_LABELS) -> str:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = train_tokenizer(directory, context_tokens)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=context_tokens,
        pad_token_id=tokenizer.pad_token_id,
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).eval().save_pretrained(directory)
    return f"a BERT sequence classifier (2 layers, hidden size 64) with the labels {', '.join(labels)}"


_WRITERS: dict[str, Callable[..., str]] = {"chat": _write_chat_lm, "vlm": _write_vlm, "nli": _write_nli}

_USES = {
    "chat": (
        "a text policy (`--policy hf:DIR`, `--reasoner hf:DIR`), served by `vllm serve` as an "
        "OpenAI-compatible endpoint, or a tokenizer for `embodia sxs data --tokenizer DIR`"
    ),
    "vlm": (
        "a vision policy for `embodia explore --agent dfs --policy hf:DIR`, a stream agent or speaker "
        "(`embodia stream run --agent hf:DIR`), a CSMR perceiver, or the backbone of "
        "`embodia stream train-gate --model DIR`"
    ),
    "nli": "the SxS support guard (`embodia eval sxs --support nli:DIR`)",
}


def _model_card(kind: str, seed: int, context_tokens: int, architecture: str) -> str:
    return f"""# Tiny {WHAT[kind]} with RANDOM WEIGHTS (built by embodia)

**These are random weights.** This model was built from a config by `embodia models tiny {kind}`
(seed {seed}) and never trained. What it writes or scores is noise.

What it is for: trying every path of embodia offline and in seconds, on a machine with no GPU
and no download: loading the directory with `from_pretrained(..., local_files_only=True)`,
its tokenizer, chat template{" and image processor" if kind == "vlm" else ""}, logprobs, and
serving it with vLLM. Use it as {_USES[kind]}.

What it is not for: any measurement. Accuracy, coverage, F1 or any other score a run gets
with this model says nothing about a method or a model; never report one. Runs that use it
say so: embodia warns when it loads the model, the policy's name in the run's records ends in
"(random weights)", and the run's `config.yaml` (`run.json` for DSR) lists it under
`random_weights`.

- Architecture: {architecture}.
- Context: {context_tokens} tokens (`max_position_embeddings` and the tokenizer's `model_max_length`).
- `{BUILD_MARKER}` marks the finished build (`"random_weights": true`).
"""


def build_tiny(
    kind: str,
    directory: Path | str,
    *,
    seed: int = 0,
    context_tokens: int | None = None,
    labels: Sequence[str] | None = None,
    attention_heads: int = CHAT_ATTENTION_HEADS,
    initializer_range: float = CHAT_INITIALIZER_RANGE,
    vlm_shape: Mapping[str, int | float] | None = None,
) -> bool:
    """Build the tiny ``kind`` model (chat, vlm or nli) into ``directory``; see the module
    docstring. ``context_tokens`` defaults per kind (:data:`DEFAULT_CONTEXT`); ``labels``
    (nli only) are the classes, default :data:`NLI_LABELS`. ``attention_heads`` (2, 4 or 8) and
    ``initializer_range`` (the initial weights' std) shape the chat LM only, ``vlm_shape`` (keys
    of :data:`VLM_SHAPE`) the VLM only; a non-default value is part of the build's identity.
    Returns False when ``directory`` already holds this very build (nothing is done), True when
    it was built; ``directory`` must not exist, or be an empty folder.

    An :class:`EmbodiaError` names the problem when the arguments are out of range or the
    folder holds something else (another build, or other files).
    """
    if kind not in KINDS:
        raise EmbodiaError(f"unknown tiny model {kind!r}: expected one of {', '.join(KINDS)}")
    context = DEFAULT_CONTEXT[kind] if context_tokens is None else context_tokens
    check_range("the context", context, MIN_CONTEXT, MAX_CONTEXT)
    check_seed("the seed", seed)
    options: dict[str, Any] = {}
    if kind == "nli":
        options["labels"] = list(NLI_LABELS if labels is None else labels)
    elif labels is not None:
        raise EmbodiaError(f"labels are for the nli model, not the {kind} one")
    shape = {"attention_heads": attention_heads, "initializer_range": initializer_range}
    if shape != CHAT_SHAPE:
        if kind != "chat":
            raise EmbodiaError(f"attention_heads and initializer_range shape the chat model, not {kind}")
        if attention_heads not in (2, 4, 8):
            raise EmbodiaError(f"attention_heads must be 2, 4 or 8, got {attention_heads!r}")
        if not (isinstance(initializer_range, int | float) and 0 < initializer_range <= 1):
            raise EmbodiaError(f"initializer_range must be in (0, 1], got {initializer_range!r}")
        options |= {key: value for key, value in shape.items() if value != CHAT_SHAPE[key]}
    if vlm_shape:
        if kind != "vlm":
            raise EmbodiaError(f"vlm_shape shapes the vlm model, not {kind}")
        unknown = sorted(set(vlm_shape) - set(VLM_SHAPE))
        if unknown:
            raise EmbodiaError(
                f"unknown VLM shape option {', '.join(unknown)}; known: {', '.join(VLM_SHAPE)}"
            )
        for key, value in vlm_shape.items():
            low, high = _VLM_LIMITS[key]
            if not (isinstance(value, type(VLM_SHAPE[key]) | int) and low <= value <= high):
                raise EmbodiaError(f"VLM shape {key} must be in [{low}, {high}], got {value!r}")
        if vlm_shape.get("image_side", 56) % 14:
            raise EmbodiaError(
                f"VLM shape image_side must be a multiple of 14, got {vlm_shape['image_side']}"
            )
        options |= {key: value for key, value in vlm_shape.items() if value != VLM_SHAPE[key]}
    target = Path(directory)
    wanted: dict[str, Any] = {"kind": kind, "seed": seed, "context_tokens": context, **options}
    if _is_this_build(target, wanted):
        return False
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise EmbodiaError(f"{target} is a file, not a folder")
        if any(target.iterdir()):
            raise EmbodiaError(f"{target} holds other files: pick a new or empty folder for the tiny model")
    target = target.resolve()  # a link to an empty folder: the build goes where it points
    # A name of its own in the same folder, so that the last step is one rename.
    staging = target.parent / f".{target.name}.building-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
    except OSError as error:
        raise EmbodiaError(f"cannot create {target}: {error.strerror or error}") from None
    try:
        architecture = _WRITERS[kind](staging, seed, context, **options)
        (staging / MODEL_CARD).write_text(_model_card(kind, seed, context, architecture), encoding="utf-8")
        marker = {**wanted, "random_weights": True, "built_by": f"embodia models tiny {kind}"}
        (staging / BUILD_MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        try:
            staging.rename(target)  # replaces an empty folder; a non-empty one is refused
        except OSError as error:
            if _is_this_build(target, wanted):  # another process built the same meanwhile
                return False
            raise EmbodiaError(
                f"cannot move the finished build into {target}: {error.strerror or error}"
            ) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return True


def _is_this_build(directory: Path, wanted: Mapping[str, Any]) -> bool:
    """Whether ``directory`` holds the build ``wanted`` describes; an error naming the
    differences when it holds another tiny-model build."""
    marker = read_marker(directory)
    if marker is None:
        return False
    if marker.get(TRAINED_BY):
        recipes = " then ".join(map(str, marker[TRAINED_BY]))
        raise EmbodiaError(
            f"{directory} holds a model trained from a tiny build ({recipes}): pick another folder"
        )
    # A shape option is in the marker only when it is not the default: compare it both ways.
    keys = [*wanted, *(key for key in SHAPES if key not in wanted)]
    differences = [
        f"{key} {_plain(marker.get(key, SHAPES.get(key)))}, not {_plain(wanted.get(key, SHAPES.get(key)))}"
        for key in keys
        if marker.get(key) != wanted.get(key)
    ]
    if differences:
        raise EmbodiaError(
            f"{directory} already holds a tiny {marker.get('kind')} model built otherwise "
            f"({'; '.join(differences)}): pick another folder"
        )
    return True


def _plain(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def build_tiny_chat_lm(
    directory: Path | str,
    seed: int = 0,
    context_tokens: int = DEFAULT_CONTEXT["chat"],
    attention_heads: int = CHAT_ATTENTION_HEADS,
    initializer_range: float = CHAT_INITIALIZER_RANGE,
) -> Path:
    """A random-weight Qwen2ForCausalLM (2 layers, hidden 128) with its tokenizer, in ``directory``;
    ``attention_heads`` and ``initializer_range`` as :func:`build_tiny` takes them."""
    build_tiny(
        "chat",
        directory,
        seed=seed,
        context_tokens=context_tokens,
        attention_heads=attention_heads,
        initializer_range=initializer_range,
    )
    return Path(directory)


def build_tiny_vlm(
    directory: Path | str,
    seed: int = 0,
    context_tokens: int = DEFAULT_CONTEXT["vlm"],
    shape: Mapping[str, int | float] | None = None,
) -> Path:
    """A random-weight LLaVA (1-layer CLIP vision tower, 2-layer Qwen2 decoder) with a PIL
    processor; ``shape`` changes the :data:`VLM_SHAPE` options it names."""
    build_tiny("vlm", directory, seed=seed, context_tokens=context_tokens, vlm_shape=shape)
    return Path(directory)


CAPTIONER_SHAPE: dict[str, int | float] = {
    "text_layers": 4,
    "vision_layers": 2,
    "vision_hidden": 64,
    "image_side": 84,
    "vlm_initializer_range": 0.02,
}
"""The VLM shape the hallucination study trains from scratch (see :data:`VLM_SHAPE`)."""


def build_tiny_nli(
    directory: Path | str,
    seed: int = 0,
    labels: Sequence[str] = NLI_LABELS,
    context_tokens: int = DEFAULT_CONTEXT["nli"],
) -> Path:
    """A random-weight BERT sequence classifier with NLI labels (an NLI cross-encoder's shape)."""
    build_tiny("nli", directory, seed=seed, context_tokens=context_tokens, labels=labels)
    return Path(directory)
