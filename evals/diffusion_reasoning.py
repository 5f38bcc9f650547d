"""DiffThinker measured: the diffusion reasoner against a random solver and a text policy trained
by SFT then GRPO on the same puzzle instances, and the two together (``docs/diffusion_reasoning.md``).

Per seed, :func:`run_diffusion_study`:

1. **Diffusion reasoner.** A :class:`~embodia.policies.diffusion_reasoner.SolutionNet` is trained
   by flow matching on the (puzzle, solution) images of instances ``0 .. train_instances - 1``,
   then solves the held-out instances (seeds from :data:`HELD_OUT_SEED`). Reported:
   accuracy and seconds per answer at every count of ``sampling_steps`` (controllability and
   efficiency), and best-of-``samples`` accuracy (the samples of one puzzle are one batch; the
   checker keeps the first correct one: native parallelism).
2. **Random solver.** The image view's ``random_answer`` on the same instances (a random walk
   that sees the walls; random digits among those the givens leave open; a random
   permutation of the tiles).
3. **Text policy.** A chat LM (``text_policy``, or a tiny random-weight one built in the run
   folder) is fine-tuned on the first ``text_sft_instances`` training instances written as text
   (``embodia/Puzzle-v0`` with ``text=True``: the puzzle's prompt and its text drawing, the
   reference answer as the JSON reply the puzzle reads), then trained by GRPO on the instances after them,
   the puzzle's checker as reward. It answers the held-out instances greedily.
4. **Collaboration.** The text policy chooses among the reasoner's ``samples`` answers of each
   puzzle: the answer whose reply it gives the highest mean log-probability
   per token. Its accuracy is set against the reasoner's first sample alone, the text policy
   alone, and the checker's best-of-n (the ceiling of any chooser).

A jigsaw has no text drawing, so a text-only policy cannot see it: its study records the text
policy and collaboration as None (steps 3 and 4 are skipped).

The folder holds ``evals.jsonl`` (one line per seed, written as it finishes; ``resume=True``
skips those and continues a text policy's training where it stopped), ``seed-N/`` (the
reasoner's weights and training time, the denoising frames of the first held-out puzzle as
``frames.png``, the text policy's ``sft/`` and ``grpo/`` run folders and ``trained.json``),
``metrics.jsonl`` (the reasoner's flow matching loss every ``log_every`` steps) and
``summary.json`` (means over seeds).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodia.core.limits import check_seed, check_whole
from embodia.core.runs import RecordCallback, RecordLog, RunFolder, read_run_records, runner
from embodia.core.weights import load_weights
from embodia.errors import EmbodiaError
from embodia.policies.diffusion_reasoner import (
    PuzzleImages,
    ReasonerTraining,
    SolutionNet,
    frames_to_pictures,
    puzzle_images,
    sample_solutions,
    solve,
    train_reasoner,
    training_pairs,
)
from embodia.policies.recipes.solutions import PUZZLE_ENV_ID, puzzle_reply, puzzle_solution_records

EVALS = "evals.jsonl"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
REPLY_TOKENS = {"maze": 32, "frozenlake": 32, "sudoku": 112, "jigsaw": 64}
"""Tokens a text policy's reply may take, by puzzle: the reference reply with room (a 5x5
maze's path in its JSON, a sudoku's 81 digits, a hard jigsaw's 16 tile numbers)."""
HELD_OUT_SEED = 1_000_000
"""The held-out instances' first seed: far from every training instance."""
REASONER = "reasoner.safetensors"


class DiffusionStudyError(EmbodiaError, ValueError):
    """Study settings that cannot be used; the message names them."""


@dataclass(frozen=True)
class DiffusionStudySettings:
    """A DiffThinker study (module docstring)."""

    puzzle: str = "maze"
    difficulty: str = "easy"
    seeds: tuple[int, ...] = (0,)
    train_instances: int = 20_000
    test_instances: int = 200
    width: int = 32
    iterations: int = 16
    train_steps: int = 600
    batch_size: int = 64
    learning_rate: float = 3e-3
    sampling_steps: tuple[int, ...] = (1, 2, 4, 8)
    answer_steps: int = 4
    """Sampling steps of the best-of-n and collaboration answers."""
    samples: int = 4
    text_policy: str | None = None
    """The chat LM to train (``hf:DIR``); None builds a tiny random-weight one per seed."""
    text_sft_instances: int = 2_000
    text_sft_steps: int = 300
    text_sft_learning_rate: float = 1e-3
    text_grpo_steps: int = 10
    text_grpo_prompts: int = 4
    text_grpo_group: int = 4
    text_grpo_learning_rate: float = 1e-5
    log_every: int = 25

    def __post_init__(self) -> None:
        check_whole(
            self,
            "train_instances",
            "test_instances",
            "width",
            "iterations",
            "train_steps",
            "batch_size",
            "answer_steps",
            "samples",
            "text_sft_instances",
            "text_grpo_prompts",
            "text_grpo_group",
            "log_every",
        )
        check_whole(self, "text_sft_steps", "text_grpo_steps", minimum=0)
        if not self.seeds:
            raise DiffusionStudyError("the study needs at least one seed")
        for seed in self.seeds:
            check_seed("a study seed", seed, DiffusionStudyError)
        if not self.sampling_steps or min(self.sampling_steps) < 1:
            raise DiffusionStudyError(f"sampling_steps must be counts >= 1, got {self.sampling_steps}")
        if self.text_sft_instances > self.train_instances:
            raise DiffusionStudyError(
                f"the text policy learns from the reasoner's instances: text_sft_instances "
                f"({self.text_sft_instances}) must not exceed train_instances ({self.train_instances})"
            )
        images = puzzle_images(self.puzzle, self.difficulty)
        if self.difficulty not in images.task.difficulties:
            raise DiffusionStudyError(
                f"unknown {self.puzzle} difficulty {self.difficulty!r}: expected one of "
                f"{', '.join(images.task.difficulties)}"
            )


def _accuracy(images: PuzzleImages, answers: Sequence[Any], instances: Sequence[Any]) -> float:
    return float(np.mean([images.check(a, i).correct for a, i in zip(answers, instances, strict=True)]))


def _score(images: PuzzleImages, answers: Sequence[Any], instances: Sequence[Any]) -> float:
    """The checker's mean partial score (a sudoku's blank cells right, a jigsaw's positions)."""
    return float(np.mean([images.check(a, i).score for a, i in zip(answers, instances, strict=True)]))


def _text_prompts(settings: DiffusionStudySettings, seeds: Sequence[int]) -> list[str]:
    records = puzzle_solution_records(settings.puzzle, settings.difficulty, seeds)
    return [str(record["messages"][0]["content"]) for record in records]


def _chat(prompt: str) -> Any:
    from embodia.policies.rollout_views import ChatPrompt

    return ChatPrompt(({"role": "user", "content": prompt},), ())


def train_text_policy(
    settings: DiffusionStudySettings, seed: int, out: Path, resume: bool
) -> tuple[str, float]:
    """SFT then GRPO of the text policy (module docstring, step 3) under ``out``; returns the
    trained policy's spec and the seconds its training took (here, this time)."""
    from embodia.policies.recipes.grpo_trainer import GRPOSettings, run_grpo
    from embodia.policies.recipes.sft import SFTSettings, run_sft
    from embodia.policies.tiny_models import build_tiny_chat_lm

    trained = out / "trained.json"
    if resume and trained.is_file():
        record = json.loads(trained.read_text())
        return str(record["policy"]), float(record["train_seconds"])
    started = time.perf_counter()
    model = settings.text_policy
    if model is None:
        build_tiny_chat_lm(out / "base", seed=seed)
        model = f"hf:{out / 'base'}"
    records = tuple(
        puzzle_solution_records(settings.puzzle, settings.difficulty, range(settings.text_sft_instances))
    )
    policy = model
    if settings.text_sft_steps:
        sft = run_sft(
            SFTSettings(
                model=model,
                data=records,
                max_steps=settings.text_sft_steps,
                learning_rate=settings.text_sft_learning_rate,
                lr_scheduler="cosine",
                warmup_steps=max(1, settings.text_sft_steps // 20),
                batch_size=16,
                max_length=1024,
                logging_steps=10,
                seed=seed,
            ),
            out / "sft",
            resume=resume and (out / "sft").exists(),
        )
        policy = str(sft["policy"])
    if settings.text_grpo_steps:
        grpo = run_grpo(
            GRPOSettings(
                policy=policy,
                env=PUZZLE_ENV_ID,
                env_options={"task": settings.puzzle, "difficulty": settings.difficulty, "text": True},
                images=False,
                steps=settings.text_grpo_steps,
                prompts_per_step=settings.text_grpo_prompts,
                group_size=settings.text_grpo_group,
                learning_rate=settings.text_grpo_learning_rate,
                max_new_tokens=REPLY_TOKENS[settings.puzzle],
                first_seed=settings.text_sft_instances,  # after the SFT instances
                seed=seed,
            ),
            out / "grpo",
            resume=resume and (out / "grpo").exists(),
        )
        policy = str(grpo["policy"])
    seconds = time.perf_counter() - started
    trained.write_text(json.dumps({"policy": policy, "train_seconds": seconds}))
    return policy, seconds


def text_replies(policy: Any, prompts: Sequence[str], reply_tokens: int) -> list[str]:
    """The text policy's greedy reply to each prompt, of at most ``reply_tokens`` tokens."""
    replies = []
    for start in range(0, len(prompts), 16):
        batch = [_chat(p) for p in prompts[start : start + 16]]
        replies += [s.text for s in policy.sample(batch, max_new_tokens=reply_tokens, temperature=0.0)]
    return replies


def choose_by_likelihood(policy: Any, prompt: str, candidates: Sequence[Any], task: Any) -> Any:
    """The candidate answer whose reply (as ``task`` reads it, :func:`puzzle_reply`) the text
    policy finds most likely after ``prompt``, by
    the mean log-probability of the reply's tokens (a total would favour the shortest reply,
    and a path cut short is wrong)."""
    distinct = list({json.dumps(c): c for c in candidates}.values())
    encoded = policy._encode(_chat(prompt).messages, (), to_device=False)["input_ids"][0].tolist()
    replies = [puzzle_reply(task, answer) for answer in distinct]
    completions = [policy.tokenizer(reply, add_special_tokens=False)["input_ids"] for reply in replies]
    with torch.no_grad():
        scores = policy.completion_logps([encoded] * len(distinct), completions)
    means = (scores.logps * scores.mask).sum(dim=1) / scores.mask.sum(dim=1)
    return distinct[int(torch.argmax(means))]


def text_arms(
    settings: DiffusionStudySettings,
    seed: int,
    out: Path,
    resume: bool,
    test_seeds: Sequence[int],
    instances: Sequence[Any],
    sampled: Sequence[Sequence[Any]],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The text policy alone and choosing among the reasoner's ``sampled`` answers (module
    docstring, steps 3 and 4); both None for a puzzle with no text drawing (a jigsaw), which a
    text-only policy cannot see."""
    from embodia.policies.spec import make_trainable_policy

    images = puzzle_images(settings.puzzle, settings.difficulty)
    if not images.task.drawn_as_text:
        return None, None
    policy_spec, train_seconds = train_text_policy(settings, seed, out, resume)
    policy = make_trainable_policy(policy_spec)
    prompts = _text_prompts(settings, test_seeds)
    started = time.perf_counter()
    replies = text_replies(policy, prompts, REPLY_TOKENS[settings.puzzle])
    text_seconds = (time.perf_counter() - started) / len(instances)
    verdicts = [images.task.score(r, i) for r, i in zip(replies, instances, strict=True)]
    started = time.perf_counter()
    chosen = [choose_by_likelihood(policy, p, s, images.task) for p, s in zip(prompts, sampled, strict=True)]
    choose_seconds = (time.perf_counter() - started) / len(instances)
    text = {
        "train_seconds": train_seconds,
        "accuracy": float(np.mean([v.correct for v in verdicts])),
        "score": float(np.mean([v.score for v in verdicts])),
        "seconds_per_answer": text_seconds,
    }
    collaboration = {
        "accuracy": _accuracy(images, chosen, instances),
        "choose_seconds_per_answer": choose_seconds,
    }
    return text, collaboration


def study_seed(
    settings: DiffusionStudySettings,
    seed: int,
    out: Path,
    resume: bool,
    log: Callable[[dict[str, Any]], None],
    note: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Every measurement of one seed (module docstring). ``log`` takes the reasoner's losses;
    ``note`` takes a record once the reasoner is trained, so that a run cut after it keeps it."""
    images = puzzle_images(settings.puzzle, settings.difficulty)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = SolutionNet(settings.width, settings.iterations)
    weights = out / REASONER
    if resume and weights.is_file():
        load_weights(model, weights, DiffusionStudyError, "the study's reasoner settings")
        model.eval()
        train_seconds = float(json.loads((out / "reasoner.json").read_text())["train_seconds"])
    else:
        from safetensors.torch import save_file

        puzzles, solutions, _ = training_pairs(images, range(settings.train_instances))

        def on_step(step: int, loss: float) -> None:
            if step % settings.log_every == 0 or step == settings.train_steps:
                log({"seed": seed, "step": step, "loss": loss})

        started = time.perf_counter()
        train_reasoner(
            model,
            puzzles,
            solutions,
            ReasonerTraining(settings.train_steps, settings.batch_size, settings.learning_rate, seed),
            on_step,
        )
        train_seconds = time.perf_counter() - started
        (out / "reasoner.json").write_text(json.dumps({"train_seconds": train_seconds}))
        # the weights come last and whole: their presence marks the reasoner as trained
        save_file(model.state_dict(), str(weights.with_suffix(".partial")))
        os.replace(weights.with_suffix(".partial"), weights)
        note({"seed": seed, "stage": "reasoner trained", "train_seconds": train_seconds})
    test_seeds = range(HELD_OUT_SEED, HELD_OUT_SEED + settings.test_instances)
    instances = [images.task.generate(s, settings.difficulty) for s in test_seeds]

    by_steps = {}
    for steps in settings.sampling_steps:
        started = time.perf_counter()
        answers = [a[0] for a in solve(model, images, instances, steps, seed=seed)]
        by_steps[str(steps)] = {
            "accuracy": _accuracy(images, answers, instances),
            "seconds_per_answer": (time.perf_counter() - started) / len(instances),
        }
    sampled = solve(model, images, instances, settings.answer_steps, samples=settings.samples, seed=seed)
    first = [s[0] for s in sampled]
    best_of_n = float(
        np.mean([any(images.check(a, i).correct for a in s) for s, i in zip(sampled, instances, strict=True)])
    )
    frames: list[np.ndarray] = []
    puzzle = torch.as_tensor(images.pair(instances[0])[0])[None]
    sample_solutions(
        model,
        puzzle,
        max(settings.sampling_steps),
        generator=torch.Generator().manual_seed(seed),
        frames=frames,
    )
    pictures = frames_to_pictures(frames, 0)
    from PIL import Image

    Image.fromarray(
        np.concatenate([images.native(instances[0]).repeat(16, 0).repeat(16, 1), *pictures], 1)
    ).save(out / "frames.png")
    rng = random.Random(seed)
    guesses = [images.random_answer(i, rng) for i in instances]

    text, collaboration = text_arms(settings, seed, out / "text", resume, test_seeds, instances, sampled)
    return {
        "seed": seed,
        "reasoner": {
            "train_seconds": train_seconds,
            "by_sampling_steps": by_steps,
            "first_sample_accuracy": _accuracy(images, first, instances),
            "first_sample_score": _score(images, first, instances),
            "best_of_n_accuracy": best_of_n,
            "samples": settings.samples,
        },
        "random_accuracy": _accuracy(images, guesses, instances),
        "random_score": _score(images, guesses, instances),
        "text": text,
        "collaboration": collaboration,
    }


def summarise(lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means over seeds of each headline number, and each seed's; the text policy's numbers
    are None where the puzzle has no text drawing."""

    def mean(get: Callable[[Mapping[str, Any]], float]) -> float:
        return statistics.fmean(get(line) for line in lines)

    def arm_mean(arm: str, key: str) -> float | None:
        if any(line[arm] is None for line in lines):
            return None
        return statistics.fmean(line[arm][key] for line in lines)

    def by_steps(key: str) -> dict[str, float]:
        steps = lines[0]["reasoner"]["by_sampling_steps"]
        return {
            k: statistics.fmean(line["reasoner"]["by_sampling_steps"][k][key] for line in lines)
            for k in steps
        }

    return {
        "seeds": [line["seed"] for line in lines],
        "accuracy_by_sampling_steps": by_steps("accuracy"),
        "seconds_per_answer_by_sampling_steps": by_steps("seconds_per_answer"),
        "diffusion_first_sample_accuracy": mean(lambda line: line["reasoner"]["first_sample_accuracy"]),
        "diffusion_first_sample_score": mean(lambda line: line["reasoner"]["first_sample_score"]),
        "diffusion_best_of_n_accuracy": mean(lambda line: line["reasoner"]["best_of_n_accuracy"]),
        "diffusion_train_seconds": mean(lambda line: line["reasoner"]["train_seconds"]),
        "random_accuracy": mean(lambda line: line["random_accuracy"]),
        "random_score": mean(lambda line: line["random_score"]),
        "text_accuracy": arm_mean("text", "accuracy"),
        "text_score": arm_mean("text", "score"),
        "text_seconds_per_answer": arm_mean("text", "seconds_per_answer"),
        "text_train_seconds": arm_mean("text", "train_seconds"),
        "collaboration_accuracy": arm_mean("collaboration", "accuracy"),
        "per_seed": list(lines),
    }


@runner
def run_diffusion_study(
    settings: DiffusionStudySettings,
    out: Path,
    *,
    resume: bool = False,
    on_record: RecordCallback | None = None,
) -> dict[str, Any]:
    """Every seed's measurements (module docstring); returns the summary (also ``summary.json``)."""
    folder = RunFolder(out, EVALS)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    kept = folder.kept_records()
    done = {r["seed"]: r for r in kept if "reasoner" in r}
    metrics_path = folder.out / METRICS
    # a seed's losses stay while its trained reasoner does (a resumed seed loads it, not retrains)
    trained = {s for s in settings.seeds if (folder.out / f"seed-{s}" / REASONER).is_file()}
    kept_losses = [
        r
        for r in (read_run_records(metrics_path) if metrics_path.is_file() else [])
        if r.get("seed") in done or r.get("seed") in trained
    ]
    with (
        folder.recording(kept, {"settings": folder.config}) as log,
        RecordLog(metrics_path, kept_losses) as losses,
    ):
        for seed in settings.seeds:
            if seed in done:
                continue
            line = study_seed(settings, seed, folder.out / f"seed-{seed}", resume, losses.append, log.append)
            log.append(line)
            done[seed] = line
            if on_record is not None:
                on_record(line)
    summary = summarise([done[s] for s in settings.seeds])
    summary["settings"] = folder.config
    folder.finish(SUMMARY, summary)
    return summary
