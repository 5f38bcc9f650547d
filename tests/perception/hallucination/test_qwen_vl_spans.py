"""The caption pass on a Qwen-VL-style model (Qwen2-VL: image features as ``<|image_pad|>``
tokens between ``<|vision_start|>`` and ``<|vision_end|>``, rotary positions in three sections).

transformers' ``Qwen2VLProcessor`` needs its video processor, which needs torchvision, which
does not load beside the CPU torch here; the processor below does what it does for images
(the real PIL image processor, then one ``<|image_pad|>`` per merged patch) and nothing else.
The model is a real random-weight ``Qwen2VLForConditionalGeneration``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from embodia.perception.hallucination.detectors import attention_scores, inslen_scores, token_signals
from embodia.perception.hallucination.mentions import Mention
from embodia.perception.hallucination.signals import caption_pass

IMAGE_PAD, MERGE = "<|image_pad|>", 2


class ImageOnlyQwen2VLProcessor:
    def __init__(self, tokenizer: Any, image_processor: Any) -> None:
        self.tokenizer, self.image_processor = tokenizer, image_processor

    def apply_chat_template(self, conversation: Any, **options: Any) -> str:
        return str(self.tokenizer.apply_chat_template(conversation, **options))

    def __call__(self, text: list[str], images: list[Any], **options: Any) -> dict[str, Any]:
        pixels = self.image_processor(images=images, return_tensors="pt")
        count = int(pixels["image_grid_thw"][0].prod()) // MERGE**2
        expanded = [t.replace(IMAGE_PAD, IMAGE_PAD * count) for t in text]
        encoded = self.tokenizer(expanded, return_tensors="pt", add_special_tokens=False)
        image_tokens = encoded["input_ids"] == self.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        return {**encoded, **pixels, "mm_token_type_ids": image_tokens.long()}


@pytest.fixture(scope="module")
def qwen_vl(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from embodia.policies.tiny_models import train_tokenizer

    tokenizer = train_tokenizer(tmp_path_factory.mktemp("qwen-vl"))
    token = tokenizer.convert_tokens_to_ids
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
        },
        vision_config={
            "depth": 1,
            "embed_dim": 32,
            "hidden_size": 64,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": MERGE,
            "temporal_patch_size": 2,
        },
        image_token_id=token(IMAGE_PAD),
        vision_start_token_id=token("<|vision_start|>"),
        vision_end_token_id=token("<|vision_end|>"),
    )
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration(config).eval()
    model.set_attn_implementation("eager")
    image_processor = Qwen2VLImageProcessorPil(
        min_pixels=56 * 56, max_pixels=56 * 56, patch_size=14, merge_size=MERGE, temporal_patch_size=2
    )
    return ImageOnlyQwen2VLProcessor(tokenizer, image_processor), model


def test_spans_and_scores_on_a_qwen_vl_model(qwen_vl: tuple[Any, Any], tmp_path: Path) -> None:
    processor, model = qwen_vl
    caption = "There are two objects: a red cube and a blue sphere."
    mentions = [
        Mention("red cube", 25, 33, ("red", "cube")),
        Mention("blue sphere", 40, 51, ("blue", "sphere")),
    ]
    image = np.random.default_rng(0).integers(0, 255, (56, 56, 3), dtype=np.uint8)
    scored = caption_pass(
        model, processor, image, "Describe the image in detail.", caption, mentions, attentions=True
    )
    tokenizer = processor.tokenizer
    # 56x56 pixels: 4x4 patches of 14, merged 2x2 into 4 image tokens.
    assert scored.image.numel() == 4
    assert tokenizer.decode(scored.input_ids[scored.image[-1] + 1]) == "<|vision_end|>"
    assert tokenizer.decode(scored.input_ids[scored.instruction]).startswith("Describe the image")
    assert [tokenizer.decode(scored.input_ids[t]).strip() for t in scored.mention_tokens] == [
        "red cube",
        "blue sphere",
    ]
    assert scored.hidden.shape[0] == 3 and scored.attentions is not None
    for scores in (inslen_scores(scored), attention_scores(scored)):
        assert len(scores) == 2 and np.isfinite(scores).all()
    assert [rows.shape[1] for rows in token_signals(scored)] == [2 * 2 + 1 + 2 + 1] * 2
