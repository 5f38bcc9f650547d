"""Tiny random-weight chat models built from configs, for testing model backends end to end.

Nothing is downloaded: the tokenizer is a byte-level BPE trained here with ``tokenizers`` on a
corpus this module generates, and the models are toy-size configs with random weights saved
with ``save_pretrained``, so every loading path (``from_pretrained`` with
``local_files_only=True``, chat templates, processors) runs for real.

- :func:`build_tiny_chat_lm`: a Qwen2 causal LM. Its attention head_dim is 64 because vLLM's
  CPU attention only accepts 32/64/128, and another suite serves this same directory with a
  real vLLM server.
- :func:`build_tiny_vlm`: a Qwen2-VL. Its processor pairs the tokenizer with the PIL-based
  ``Qwen2VLImageProcessorPil`` and has no video processor, because Qwen2-VL's video processor
  needs torchvision, which does not load beside the CPU torch (DESIGN.md).

A finished build writes a marker file last; building again into the same directory is a
no-op, so an interrupted build is redone rather than half-used.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    CLIPImageProcessorPil,
    GenerationConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

BUILD_MARKER = "tiny-model-complete.json"
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
# the vision placeholder that the processor expands to one pad token per merged patch.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}"
    "{{- message['content'] -}}"
    "{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}"
    "{{- part['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)

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


def train_tokenizer(directory: Path | str) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE with ChatML special tokens and save it into ``directory``."""
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
        model_max_length=1024,
    )
    tokenizer.save_pretrained(directory)
    return tokenizer


def _is_built(directory: Path) -> bool:
    return (directory / BUILD_MARKER).is_file()


def _mark_built(directory: Path, kind: str, seed: int) -> None:
    (directory / BUILD_MARKER).write_text(json.dumps({"kind": kind, "seed": seed}))


def _text_config_values(tokenizer: PreTrainedTokenizerFast) -> dict[str, object]:
    """The toy Qwen2 decoder both models share: head_dim 64 (vLLM CPU accepts 32/64/128)."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 1024,
        "initializer_range": 0.2,
        "bos_token_id": tokenizer.convert_tokens_to_ids(END_OF_TEXT),
        "eos_token_id": tokenizer.convert_tokens_to_ids(IM_END),
        "pad_token_id": tokenizer.convert_tokens_to_ids(END_OF_TEXT),
    }


def _generation_config(tokenizer: PreTrainedTokenizerFast) -> GenerationConfig:
    return GenerationConfig(
        eos_token_id=[tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(END_OF_TEXT)],
        pad_token_id=tokenizer.convert_tokens_to_ids(END_OF_TEXT),
        bos_token_id=tokenizer.convert_tokens_to_ids(END_OF_TEXT),
    )


def build_tiny_chat_lm(directory: Path | str, seed: int = 0) -> Path:
    """A random-weight Qwen2ForCausalLM (2 layers, hidden 128) with its tokenizer, in ``directory``."""
    directory = Path(directory)
    if _is_built(directory):
        return directory
    tokenizer = train_tokenizer(directory)
    config = Qwen2Config(**_text_config_values(tokenizer), tie_word_embeddings=False, dtype="float32")
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config = _generation_config(tokenizer)
    model.save_pretrained(directory)
    _mark_built(directory, "chat_lm", seed)
    return directory


def build_tiny_vlm(directory: Path | str, seed: int = 0) -> Path:
    """A random-weight LLaVA (1-layer CLIP vision tower, 2-layer Qwen2 decoder) with a PIL processor.

    Images are resized (not cropped, so a panorama stays whole) to 56x56 pixels: 4x4 patches of
    14 pixels, i.e. 16 image tokens per image after the CLS feature is dropped.
    """
    directory = Path(directory)
    if _is_built(directory):
        return directory
    tokenizer = train_tokenizer(directory)
    image_side, patch_size = 56, 14
    config = LlavaConfig(
        text_config={"model_type": "qwen2", **_text_config_values(tokenizer), "tie_word_embeddings": False},
        vision_config={
            "model_type": "clip_vision_model",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": image_side,
            "patch_size": patch_size,
            "projection_dim": 32,
        },
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_PAD),
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
    _mark_built(directory, "vlm", seed)
    return directory


def build_tiny_nli(
    directory: Path | str, seed: int = 0, labels: tuple[str, ...] = ("contradiction", "neutral", "entailment")
) -> Path:
    """A random-weight BERT sequence classifier with NLI labels (an NLI cross-encoder's shape)."""
    from transformers import BertConfig, BertForSequenceClassification

    directory = Path(directory)
    if _is_built(directory):
        return directory
    tokenizer = train_tokenizer(directory)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).eval().save_pretrained(directory)
    _mark_built(directory, "nli", seed)
    return directory
