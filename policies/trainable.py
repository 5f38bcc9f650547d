"""A transformers policy that can be trained: sampling with logprobs, differentiable scores, LoRA, save.

:class:`TrainablePolicy` loads a causal LM or VLM from a local directory exactly as
``hf:DIR`` does (it *is* an :class:`~embodia.policies.hf.HFPolicy`, so ``complete`` drives
agents and envs as before), puts the model in train mode and optionally wraps it in LoRA
adapters (peft). On top of the chat contract it gives what a policy-gradient recipe needs:

- :meth:`TrainablePolicy.sample`: ``n`` completions per chat prompt, batched, with each
  completion token's logprob under the **sampling distribution**:
  ``log_softmax(logits / temperature)`` at the sampled token, the distribution the token was
  drawn from (temperature 0 decodes greedily and reports ``log_softmax(logits)``, the model
  at temperature 1). No logits processor runs (the model's own ``generation_config`` such as a
  repetition penalty is set aside while sampling), so these are exactly the numbers
  :meth:`completion_logps` recomputes, which is what an importance ratio needs. Sampling
  runs in eval mode (no dropout) with this policy's seeded ``torch.Generator``.
- :meth:`TrainablePolicy.completion_logps`: per-token logprobs and entropies of given
  completions after given prompts, differentiable, batched with right padding and a mask.
- :meth:`TrainablePolicy.save`: a directory ``hf:DIR`` loads again (LoRA merged into the
  weights, tokenizer or processor and chat template included).

``complete`` (the chat path) keeps HFPolicy's conventions: the model's own generation config
and logprobs of the raw distribution.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from PIL import Image
from transformers import GenerationConfig, LogitsProcessorList

from embodia.core.chat import ContextOverflowError, PolicyError, check_messages, check_temperature
from embodia.core.random_weights import BUILD_MARKER, TRAINED_BY, read_marker
from embodia.policies.hf import HFPolicy, SeededSampler
from embodia.policies.rollouts import ChatPrompt, Sample


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapters (peft) on the model's linear layers; only the adapters are trained."""

    r: int = 8
    """Rank of each adapter's two factors."""
    alpha: float = 16.0
    """Scale numerator: an adapter's update is multiplied by ``alpha / r``."""
    dropout: float = 0.0
    """Dropout on the adapters' input while training."""
    target_modules: str | tuple[str, ...] = "all-linear"
    """Module names (suffixes) that get adapters, or peft's ``"all-linear"`` (every linear
    layer but the output head)."""

    def __post_init__(self) -> None:
        if self.r < 1:
            raise PolicyError(f"LoRA rank r must be at least 1, got {self.r}")
        if not self.alpha > 0:
            raise PolicyError(f"LoRA alpha must be positive, got {self.alpha}")
        if not 0.0 <= self.dropout < 1.0:
            raise PolicyError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            raise PolicyError("LoRA target_modules must name at least one module (or be 'all-linear')")


@dataclass(frozen=True)
class TokenScores:
    """Per-token scores of a batch of completions, right-padded to the longest one."""

    logps: torch.Tensor
    """(B, L) log-probability of each completion token (0 where ``mask`` is 0)."""
    entropies: torch.Tensor
    """(B, L) entropy (nats) of the distribution each token was drawn from (0 where masked)."""
    mask: torch.Tensor
    """(B, L) 1.0 for a real completion token, 0.0 for padding."""


def token_scores(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token logprobs of ``targets`` (B, L) under ``softmax(logits / temperature)``, with
    gradient, and the predictive entropies, without; both 0 where ``mask`` is 0. ``logits``
    (B, L, V) are those at the positions that predict ``targets``; temperature 0 (greedy
    decoding) counts as 1. Every trainer scores completions through this one function."""
    scaled = logits.float() / temperature if temperature > 0 else logits.float()
    log_probs = torch.log_softmax(scaled, dim=-1)
    keep = mask.to(log_probs.dtype)
    logps = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * keep
    with torch.no_grad():
        entropies = -(log_probs.exp() * log_probs).sum(-1) * keep
    return logps, entropies


def right_padded(rows: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows as one (B, T) batch and its attention mask, padded on the right: every row
    keeps positions 0..len-1, as when it was generated alone."""
    ids = torch.full((len(rows), max(len(row) for row in rows)), pad_token_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(list(row), dtype=torch.long)
        attention[i, : len(row)] = 1
    return ids, attention


@contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Without the progress bars of ``transformers`` (one per loaded or saved shard) and of
    ``datasets`` when it is installed (one per preparation pass): a training run reports its
    progress through ``metrics.jsonl`` and its callback instead."""
    from transformers.utils import logging as transformers_logging

    # datasets comes with TRL (the train extra); a policy trained without TRL has none
    datasets: Any = importlib.import_module("datasets") if importlib.util.find_spec("datasets") else None
    datasets_bars = datasets is not None and datasets.is_progress_bar_enabled()
    transformers_bars = transformers_logging.is_progress_bar_enabled()
    if datasets is not None:
        datasets.disable_progress_bars()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if datasets_bars:
            datasets.enable_progress_bars()
        if transformers_bars:
            transformers_logging.enable_progress_bar()


def _load_peft() -> Any:
    try:
        import peft
    except ImportError as error:
        raise PolicyError(
            f"LoRA needs the peft package, which does not import here ({error}): install peft, or train "
            "without LoRA"
        ) from None
    return peft


class TrainablePolicy(HFPolicy):
    """A chat LM or VLM from ``path`` (as ``hf:DIR``), in train mode, LoRA optional; see the module docstring.

    ``path`` and the keyword ``options`` (``device``, ``dtype``, ``max_new_tokens_cap``,
    ``name``, ``seed``) are :class:`~embodia.policies.hf.HFPolicy`'s; ``lora`` wraps the
    model in adapters.
    """

    def __init__(self, path: Path | str, *, lora: LoraSettings | None = None, **options: Any) -> None:
        super().__init__(path, **options)
        self.lora = lora
        base = self.model
        self._generation_config = base.generation_config
        # Sampling: nothing but eos/pad, so no processor reshapes the distribution drawn from.
        self._plain_generation_config = GenerationConfig(
            eos_token_id=self.eos_token_ids,
            pad_token_id=self.pad_token_id,
            bos_token_id=getattr(self._generation_config, "bos_token_id", None),
        )
        if lora is not None:
            peft = _load_peft()
            config = peft.LoraConfig(
                r=lora.r,
                lora_alpha=lora.alpha,
                lora_dropout=lora.dropout,
                target_modules=lora.target_modules
                if isinstance(lora.target_modules, str)
                else list(lora.target_modules),
                bias="none",
            )
            try:
                self.model = peft.get_peft_model(base, config)
            except ValueError as error:
                raise PolicyError(f"cannot add LoRA adapters to {self.path}: {error}") from error
        self._base_model = base
        self.model.train()

    # ------------------------------------------------------------------ parameters

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters an optimiser updates: the adapters with LoRA, else every weight."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def manual_seed(self, seed: int) -> None:
        """Restart the sampling generator from ``seed`` (what ``hf:DIR?seed=N`` sets at load)."""
        self._generator.manual_seed(seed)

    # ------------------------------------------------------------------ sampling

    @contextmanager
    def _sampling_mode(self) -> Iterator[None]:
        """Eval mode and the plain generation config for one ``generate`` call, then back."""
        was_training = self.model.training
        self.model.eval()
        self._base_model.generation_config = self._plain_generation_config
        try:
            yield
        finally:
            self._base_model.generation_config = self._generation_config
            self.model.train(was_training)

    def sample(
        self,
        prompts: Sequence[ChatPrompt],
        *,
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> list[Sample]:
        """``n`` completions of each prompt, prompt-major (``samples[i * n + k]`` is the k-th of
        prompt i); logprobs as the module docstring states. ``generator`` defaults to this
        policy's own (seeded at load, :meth:`manual_seed`)."""
        if n < 1:
            raise PolicyError(f"n (completions per prompt) must be at least 1, got {n}")
        if max_new_tokens < 1:
            raise PolicyError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        check_temperature(temperature)
        if not prompts:
            return []
        encoded = []
        for prompt in prompts:
            check_messages(prompt.messages, prompt.images)
            self._check_images(prompt.images)
            encoded.append(self._encode(prompt.messages, prompt.images, to_device=False))
        rows = [item for item in encoded for _ in range(n)]
        inputs = self._left_padded(rows)
        padded_length = int(inputs["input_ids"].shape[1])
        longest_prompt = max(int(item["input_ids"].shape[1]) for item in encoded)
        max_new_tokens = min(max_new_tokens, self.max_new_tokens_cap)
        window = self.context_window()
        if window is not None:
            room = window.tokens - longest_prompt
            if room < 1:
                raise ContextOverflowError(window, prompt_tokens=longest_prompt, max_tokens=max_new_tokens)
            max_new_tokens = min(max_new_tokens, room)

        processors = LogitsProcessorList()
        if temperature > 0:
            processors.append(SeededSampler(temperature, generator or self._generator))
        config = copy.deepcopy(self._plain_generation_config)
        config.update(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            return_dict_in_generate=True,
            output_logits=True,
        )
        with self._sampling_mode(), torch.no_grad():
            output = self.model.generate(  # type: ignore[operator]
                **inputs, generation_config=config, logits_processor=processors
            )
        generated = output.sequences[:, padded_length:]
        step_logits = torch.stack(output.logits, dim=1)  # (B, steps, V), raw
        chosen, _ = token_scores(step_logits, generated, torch.ones_like(generated), temperature)

        samples = []
        eos = set(self.eos_token_ids)
        for row in range(generated.shape[0]):
            ids = generated[row].tolist()
            end = next((k + 1 for k, token in enumerate(ids) if token in eos), None)
            completion = ids if end is None else ids[:end]
            prompt_ids = encoded[row // n]["input_ids"][0].tolist()
            samples.append(
                Sample(
                    prompt_index=row // n,
                    prompt_ids=prompt_ids,
                    completion_ids=completion,
                    logprobs=chosen[row, : len(completion)].tolist(),
                    text=self.tokenizer.decode(completion, skip_special_tokens=True),
                    finish_reason="length" if end is None else "stop",
                )
            )
        return samples

    def _left_padded(self, rows: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """One batch of encoded prompts: ids and masks padded on the left (generation appends
        on the right), image tensors (pixel values, grids) concatenated in order."""
        longest = max(int(row["input_ids"].shape[1]) for row in rows)
        ids = torch.full((len(rows), longest), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for i, row in enumerate(rows):
            length = int(row["input_ids"].shape[1])
            ids[i, longest - length :] = row["input_ids"][0]
            mask[i, longest - length :] = 1
        batch: dict[str, torch.Tensor] = {"input_ids": ids, "attention_mask": mask}
        for key in rows[0]:
            if key not in batch:
                parts = [row[key] for row in rows if key in row]
                if parts:
                    batch[key] = torch.cat(parts, dim=0)
        return {key: value.to(self.device) for key, value in batch.items()}

    # ------------------------------------------------------------------ scoring

    def completion_logps(
        self,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        *,
        images: Sequence[Sequence[NDArray[np.uint8]]] | None = None,
        temperature: float = 1.0,
    ) -> TokenScores:
        """Per-token logprobs and entropies of each completion after its prompt, under
        ``softmax(logits / temperature)`` (temperature 0 counts as 1, as in :meth:`sample`);
        differentiable through the model in its current mode. ``images[i]`` are prompt i's
        pictures (a VLM's prompt ids hold one image token per patch; the pixels come from here)."""
        if len(prompt_ids) != len(completion_ids):
            raise PolicyError(
                f"{len(prompt_ids)} prompts but {len(completion_ids)} completions: "
                "give one completion per prompt"
            )
        if not prompt_ids:
            raise PolicyError("completion_logps needs at least one prompt and completion")
        check_temperature(temperature)
        if images is not None and len(images) != len(prompt_ids):
            raise PolicyError(f"images are given for {len(images)} prompts, but there are {len(prompt_ids)}")
        for i, (prompt, completion) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
            if not prompt or not completion:
                raise PolicyError(f"prompt {i} and its completion must each hold at least one token")
        prompt_lengths = [len(p) for p in prompt_ids]
        completion_lengths = [len(c) for c in completion_ids]
        total = max(p + c for p, c in zip(prompt_lengths, completion_lengths, strict=True))
        batch = len(prompt_ids)
        ids, attention = right_padded(
            [
                list(prompt) + list(completion)
                for prompt, completion in zip(prompt_ids, completion_ids, strict=True)
            ],
            self.pad_token_id,
        )
        inputs: dict[str, torch.Tensor] = {"input_ids": ids, "attention_mask": attention}
        flat_images = [image for group in images or () for image in group]
        if flat_images:
            self._check_images(flat_images)
            pixels = self.processor.image_processor(
                images=[Image.fromarray(np.ascontiguousarray(image)) for image in flat_images],
                return_tensors="pt",
            )
            inputs.update(dict(pixels))
        inputs = {key: value.to(self.device) for key, value in inputs.items()}
        logits = self.model(**inputs).logits.float()  # (B, T, V)

        longest = max(completion_lengths)
        offsets = torch.arange(longest)
        # The logits at position t predict token t + 1: completion token j of row i is
        # predicted at prompt_length_i - 1 + j.
        positions = torch.tensor(prompt_lengths)[:, None] - 1 + offsets[None, :]
        mask = (offsets[None, :] < torch.tensor(completion_lengths)[:, None]).float()
        positions = torch.minimum(positions, torch.tensor(total - 1)).to(self.device)
        picked = logits.gather(1, positions[..., None].expand(-1, -1, logits.shape[-1]))
        targets = torch.zeros((batch, longest), dtype=torch.long)
        for i, completion in enumerate(completion_ids):
            targets[i, : len(completion)] = torch.tensor(list(completion), dtype=torch.long)
        mask = mask.to(self.device)
        token_logps, entropies = token_scores(picked, targets.to(self.device), mask, temperature)
        return TokenScores(logps=token_logps, entropies=entropies, mask=mask)

    # ------------------------------------------------------------------ saving

    def save(self, directory: Path | str, *, trained_by: str | None = None, card: str | None = None) -> Path:
        """Write the model (LoRA merged into a copy of it, the training model untouched), its
        generation config, tokenizer or processor and chat template into ``directory``, which
        ``hf:DIR`` then loads (see :func:`save_model_folder` for ``trained_by`` and ``card``)."""
        self.model.generation_config = self._generation_config
        owner = self.processor if self.processor is not None else self.tokenizer
        return save_model_folder(
            self.model, owner, Path(directory), source=self.path, trained_by=trained_by, card=card
        )


def tuning(lora_r: int) -> str:
    """How a model card names the weights a run trained: LoRA adapters merged, or all of them."""
    return f"LoRA rank {lora_r}, merged" if lora_r else "full fine-tuning"


def model_card(title: str, how: str, start: str) -> str:
    """The README.md of a trained model folder: what it is, how it was trained, and when its
    start (a policy spec or folder) had random weights, that it is a toy."""
    from embodia.core.random_weights import random_weights_in

    notes = random_weights_in({"start": start})
    toy = (
        f"\n**Its starting point had random weights** ({notes['start']}): this is a toy model "
        "trained on generated data, for trying training paths offline, not a model to measure.\n"
        if notes
        else ""
    )
    return f"# {title}\n\n{how}\n{toy}"


def save_model_folder(
    model: Any,
    owner: Any,
    target: Path,
    *,
    source: Path,
    trained_by: str | None = None,
    card: str | None = None,
    keep_model: bool = True,
) -> Path:
    """Write a model folder that ``hf:DIR`` loads: ``model`` with its LoRA adapters merged,
    ``owner`` (the tokenizer or processor, with the chat template) and ``card`` as README.md.

    The folder is built in a hidden sibling and renamed into place, so ``target`` is whole or
    absent: a kill mid-save never leaves half a model. An existing ``target`` is replaced only
    when it is empty or a model folder (it has a config.json). A model whose start ``source``
    was a tiny random-weight build keeps that build's marker, with ``trained_by`` appended to
    its list of recipes: it is still a toy, and the backends that load it say so.
    ``keep_model=False`` merges the adapters in place (for a caller that is done training);
    otherwise a copy is merged and ``model`` keeps its adapters.
    """
    from peft import PeftModel

    if target.exists() and not (
        target.is_dir() and (not any(target.iterdir()) or (target / "config.json").is_file())
    ):
        raise PolicyError(f"{target} exists and is not a model folder: pick another folder to save into")
    if isinstance(model, PeftModel):
        # A merge changes the module tree in place: merge a copy when training goes on.
        model = (copy.deepcopy(model) if keep_model else model).merge_and_unload()
    staging = target.parent / f".{target.name}.saving"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        model.save_pretrained(staging)
        owner.save_pretrained(staging)
        if card is not None:
            (staging / "README.md").write_text(card, encoding="utf-8")
        marker = read_marker(source)
        if marker is not None:
            if trained_by is not None:
                marker[TRAINED_BY] = [*marker.get(TRAINED_BY, []), trained_by]
            (staging / BUILD_MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        if target.exists():  # a finished save that a kill kept from its run's summary
            shutil.rmtree(target)
        staging.rename(target)
    except OSError as error:
        raise PolicyError(f"cannot save the model into {target}: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
