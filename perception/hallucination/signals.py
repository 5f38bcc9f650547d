"""One forward pass of a VLM over (image, instruction, caption), and the spans every detector
reads: image tokens, instruction tokens, the caption's tokens and each mention's tokens.

The spans are found generically, so one code path serves LLaVA- and Qwen-VL-style models:

- **image tokens**: the positions holding the model's image token id (``image_token_id`` or
  ``image_token_index`` in its config: LLaVA repeats ``<image>`` once per patch feature,
  Qwen-VL repeats ``<|image_pad|>`` between ``<|vision_start|>`` and ``<|vision_end|>``);
- **instruction tokens**: the prompt's tokens after the last image token (the request and the
  template's turn markers up to the assistant's turn), as the InsLen reference reads them,
  less the special tokens that close the image (Qwen-VL's ``<|vision_end|>``);
- **caption tokens**: the caption, tokenised on its own and appended to the prompt, so its
  token character offsets are exact.

The pass is teacher-forced: a decoder is causal, so the prompt's hidden states equal those of
a prompt-only pass, and the hidden state at position ``p - 1`` is the one that predicted the
caption token at ``p``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from embodia.perception.hallucination.mentions import HallucinationError, Mention, token_spans

if TYPE_CHECKING:
    import torch


@dataclass
class CaptionPass:
    """What one forward pass over a captioned image holds."""

    input_ids: torch.Tensor
    """(T,) the whole sequence's token ids."""
    image: torch.Tensor
    """Positions of the image tokens."""
    instruction: torch.Tensor
    """Positions of the instruction tokens (after the last image token, before the caption)."""
    caption_start: int
    """Position of the caption's first token."""
    hidden: torch.Tensor
    """(L + 1, T, D) the language model's hidden states; 0 is the embedding layer."""
    logits: torch.Tensor
    """(T, V) the final next-token logits."""
    attentions: torch.Tensor | None
    """(L, H, T, T) attention weights (eager attention), or None when not asked for."""
    mention_tokens: list[list[int]]
    """For each mention, the absolute positions of its tokens."""
    lm_head: Any
    """The model's output embedding (a module mapping hidden states to vocabulary logits), where
    the model is: the lens moves the states it reads there and back."""

    @property
    def layers(self) -> int:
        """Decoder layers L (``hidden`` has L + 1 entries)."""
        return int(self.hidden.shape[0]) - 1

    def lens(self, layer: int, positions: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        """The logit lens: softmax(scale · lm_head(h)) of layer ``layer``'s hidden states at
        ``positions`` ((len(positions), V)), the raw residual stream through the LM head
        (no final norm on intermediate layers, as the InsLen reference reads it)."""
        import torch

        weight = next(self.lm_head.parameters())
        with torch.no_grad():
            states = self.hidden[layer, positions].to(device=weight.device, dtype=weight.dtype)
            return torch.softmax(scale * self.lm_head(states).float(), dim=-1).cpu()


def image_token_id(config: Any) -> int:
    """The token id that stands for image features in ``config``'s sequences; an error naming
    the architecture when it has none (not an image-text model this module knows)."""
    for name in ("image_token_id", "image_token_index"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise HallucinationError(
        f"{type(config).__name__} has no image token id (image_token_id / image_token_index): "
        "hallucination detectors need a LLaVA- or Qwen-VL-style model that writes image "
        "features as placeholder tokens"
    )


def use_eager_attention(model: Any) -> None:
    """Switch ``model`` to eager attention, the implementation that returns attention weights
    (SDPA and flash kernels do not)."""
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        model.set_attn_implementation("eager")


def prompt_inputs(processor: Any, image: np.ndarray, instruction: str) -> dict[str, Any]:
    """The chat-templated prompt of one image and one user request, as model inputs (the
    image placed before the text, as the ``hf`` policy backend places it)."""
    from PIL import Image

    conversation = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": instruction}]}]
    prompt = processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    return dict(
        processor(
            text=[prompt],
            images=[Image.fromarray(np.ascontiguousarray(image))],
            return_tensors="pt",
            add_special_tokens=False,
        )
    )


def sequence_inputs(
    processor: Any, image: np.ndarray, instruction: str, caption_ids: Sequence[int]
) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor]:
    """The model inputs of the prompt followed by the caption tokens ``caption_ids``: the
    processor's other inputs (pixels, and per-token ones such as Qwen-VL's modality types,
    extended over the caption as text), the prompt's token ids and the whole sequence's."""
    import torch

    inputs = prompt_inputs(processor, image, instruction)
    prompt_ids = inputs.pop("input_ids")[0]
    inputs.pop("attention_mask", None)
    caption = torch.tensor(list(caption_ids), dtype=prompt_ids.dtype)
    return (
        extend_text_inputs(inputs, int(prompt_ids.shape[0]), len(caption)),
        prompt_ids,
        torch.cat([prompt_ids, caption]),
    )


def extend_text_inputs(inputs: dict[str, Any], prompt_length: int, tokens: int) -> dict[str, Any]:
    """``inputs`` (a prompt's, less its token ids) for the prompt followed by ``tokens`` text
    tokens: per-token inputs (Qwen-VL's modality types) are extended with type 0, text."""
    import torch

    out = dict(inputs)
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[:2] == (1, prompt_length):
            out[name] = torch.cat([value, value.new_zeros((1, tokens))], dim=1)
    return out


def run_sequence(model: Any, inputs: dict[str, Any], input_ids: torch.Tensor, **options: Any) -> Any:
    """One forward pass of ``model`` over ``input_ids``, one sequence (T,) or a batch of
    equal-length ones (B, T) over the same image ``inputs`` (each tensor input, pixels and
    per-token ones alike, is repeated along its first dimension: one image per sequence)."""
    import torch

    device = next(model.parameters()).device
    batch = input_ids if input_ids.dim() == 2 else input_ids[None]
    copies = int(batch.shape[0])
    shared = {
        k: (torch.cat([v] * copies) if copies > 1 else v).to(device) if isinstance(v, torch.Tensor) else v
        for k, v in inputs.items()
    }
    with torch.no_grad():
        return model(
            input_ids=batch.to(device), attention_mask=torch.ones_like(batch).to(device), **options, **shared
        )


def caption_pass(
    model: Any,
    processor: Any,
    image: np.ndarray,
    instruction: str,
    caption: str,
    mentions: Sequence[Mention],
    *,
    attentions: bool = False,
) -> CaptionPass:
    """Run ``model`` once over the image, the instruction and ``caption`` (teacher-forced),
    keeping every hidden state (and, with ``attentions``, every attention map)."""
    import torch

    if image.ndim != 3 or image.shape[2] != 3:
        raise HallucinationError(f"an image is an H x W x 3 RGB array; got shape {tuple(image.shape)}")
    token = image_token_id(model.config)
    encoded = processor.tokenizer(caption, add_special_tokens=False, return_offsets_mapping=True)
    offsets = [tuple(pair) for pair in encoded["offset_mapping"]]
    inputs, prompt_ids, input_ids = sequence_inputs(processor, image, instruction, encoded["input_ids"])
    caption_start = int(prompt_ids.shape[0])
    image_positions = torch.nonzero(prompt_ids == token).flatten()
    if image_positions.numel() == 0:
        raise HallucinationError("the prompt holds no image token: the processor did not place the image")
    first = int(image_positions[-1]) + 1
    special = set(processor.tokenizer.all_special_ids)
    while first < caption_start and int(prompt_ids[first]) in special:
        first += 1
    instruction_positions = torch.arange(first, caption_start)
    if attentions:
        use_eager_attention(model)
    out = run_sequence(model, inputs, input_ids, output_hidden_states=True, output_attentions=attentions)
    hidden = torch.stack([h[0] for h in out.hidden_states]).float().cpu()
    maps = torch.stack([a[0] for a in out.attentions]).float().cpu() if attentions else None
    spans = token_spans(offsets, mentions)
    return CaptionPass(
        input_ids=input_ids,
        image=image_positions,
        instruction=instruction_positions,
        caption_start=caption_start,
        hidden=hidden,
        logits=out.logits[0].float().cpu(),
        attentions=maps,
        mention_tokens=[[caption_start + i for i in span] for span in spans],
        lm_head=model.get_output_embeddings(),
    )


def layer_index(fraction: float, layers: int) -> int:
    """The hidden-state index (0..L) at ``fraction`` of a model's depth: how a reference's
    layer choice for a 32-layer model (e.g. layer 24, fraction 0.75) carries to another depth."""
    return max(0, min(layers, round(fraction * layers)))
