"""``embodia train sft|grpo``: train a local transformers policy, into a run folder.

``train sft`` fine-tunes ``--policy hf:DIR`` on chat records (a JSONL file, or records generated
for the run: solved ``embodia/DSR-v0`` instances, ``embodia/ActiveMappingWaypoint-v0`` teacher
episodes); ``train grpo`` trains it by GRPO over rollouts in a registered gymnasium env. Both
show a live table of the run's ``metrics.jsonl`` lines and end with the line that says where
the trained model is (``--policy hf:OUT/final``).

Env options (``--env-option K=V``, repeatable) are ``gymnasium.make`` keyword arguments; a
value that parses as JSON is that value (``instance_seed=7`` is the integer 7), any other is
the string as written. For ``embodia/DSR-v0`` both commands use the prompt of the generated
solutions (``mode=none``, ``description=name``: the reply is only ``{"final_answer": ...}``)
unless ``--env-option`` says otherwise, so a GRPO run after ``train sft --env`` with the same
``--env-option``s sees the prompts the SFT run taught.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from embodia.cli import backend_options as backends
from embodia.cli.root import bold, console, train_app, user_errors
from embodia.cli.settings_options import OWN, FieldOption, OptionTable, settings_command
from embodia.errors import EmbodiaError

if TYPE_CHECKING:
    from rich.live import Live

DSR_ENV = "embodia/DSR-v0"
"""The env whose solved instances ``train sft --env`` generates (policies.recipes.solutions)."""
WAYPOINT_ENV = "embodia/ActiveMappingWaypoint-v0"
"""The env whose teacher episodes ``train sft --env`` generates (policies.recipes.solutions)."""
GENERATED_ENVS = (DSR_ENV, WAYPOINT_ENV)
SFT_ENV_OPTIONS = ("operation", "length", "instance_seed", "mode", "description")
"""The DSR-v0 options ``train sft --env`` reads: which instances, and their prompt."""
MAX_RECORDS = 100_000

Column = tuple[str, str]
"""A live-table column: its heading and the ``metrics.jsonl`` key it shows."""
GRPO_COLUMNS: tuple[Column, ...] = (
    ("step", "step"),
    ("reward", "reward_mean"),
    ("± std", "reward_std"),
    ("eval reward", "eval_reward"),
    ("KL", "kl"),
    ("clipped", "clip_ratio/region_mean"),
    ("entropy", "entropy"),
    ("tok/s", "tokens_per_s"),
    ("|A| max", "advantage_abs_max"),
)
SFT_COLUMNS: tuple[Column, ...] = (
    ("step", "step"),
    ("loss", "loss"),
    ("lr", "learning_rate"),
    ("tokens/s", "tokens_per_s"),
    ("eval loss", "eval_loss"),
)

EnvOptionFlags = Annotated[
    list[str] | None,
    typer.Option(
        "--env-option",
        metavar="KEY=VALUE",
        help="A gymnasium.make keyword argument, e.g. operation=array.access; repeatable. "
        "JSON values (7, true, null) are parsed, anything else is a string.",
    ),
]
OutOption = Annotated[
    Path,
    typer.Option(
        "--out", help="Run folder (metrics.jsonl, curves.png, summary.json, final/), e.g. runs/NAME."
    ),
]
ResumeOption = Annotated[
    bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")
]


def parse_env_options(values: Sequence[str] | None, flag: str = "--env-option") -> dict[str, Any]:
    """``KEY=VALUE`` strings as keyword arguments: a value that parses as JSON is that value,
    any other the string as written. An :class:`EmbodiaError` names a malformed or repeated one."""
    options: dict[str, Any] = {}
    for text in values or ():
        key, equals, raw = text.partition("=")
        key = key.strip()
        if not equals or not key.isidentifier():
            raise EmbodiaError(f"malformed {flag} {text!r}: expected KEY=VALUE, e.g. {flag} length=short")
        if key in options:
            raise EmbodiaError(f"{flag} {key} is given twice")
        try:
            options[key] = json.loads(raw)
        except ValueError:
            options[key] = raw
    return options


def with_dsr_prompt(env: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options``, for ``embodia/DSR-v0`` with the generated solutions' prompt (mode and
    description) where they do not name one (see the module docstring)."""
    if env != DSR_ENV:
        return dict(options)
    from embodia.policies.recipes.solutions import DSR_DESCRIPTION, DSR_PROMPT_MODE

    return {"mode": DSR_PROMPT_MODE, "description": DSR_DESCRIPTION, **options}


def _check_steps(steps: int | None) -> None:
    if steps is not None and steps < 1:
        raise EmbodiaError(f"--steps must be at least 1, got {steps}")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return escape(str(value))
    return str(value) if isinstance(value, int) else f"{value:.4g}"


class MetricsTable:
    """The run's ``metrics.jsonl`` lines as a table: live on a terminal (the latest rows that
    fit), printed whole once the run ends (elsewhere only then)."""

    def __init__(self, title: str, columns: Sequence[Column], out: Console = console) -> None:
        self.title = title
        self.columns = columns
        self.console = out
        self.rows: list[dict[str, Any]] = []
        self._live: Live | None = None

    def render(self, rows: Sequence[Mapping[str, Any]]) -> Table:
        table = Table(title=escape(self.title), title_justify="left")
        for heading, _ in self.columns:
            table.add_column(heading, justify="right")
        for row in rows:
            table.add_row(*(_cell(row.get(key)) for _, key in self.columns))
        return table

    def add(self, line: Mapping[str, Any]) -> None:
        """One ``metrics.jsonl`` line (the runner's ``on_step`` / ``on_log``)."""
        self.rows.append(dict(line))
        if self._live is not None:
            fits = max(self.console.size.height - 8, 3)
            self._live.update(self.render(self.rows[-fits:]), refresh=True)

    def __enter__(self) -> MetricsTable:
        if self.console.is_terminal:
            from rich.live import Live

            self._live = Live(self.render([]), console=self.console, transient=True, auto_refresh=False)
            self._live.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.rows:
            self.console.print(self.render(self.rows))


def _finish_line(what: str, out: Path, summary: Mapping[str, Any], numbers: str) -> None:
    console.print(
        f"{what}: {summary['steps']} steps{numbers}; run folder {bold(out)}; "
        f"use the model with [bold]--policy {escape(str(summary['policy']))}[/]",
        highlight=False,
        soft_wrap=True,
    )


def _change(first: Any, last: Any, what: str) -> str:
    if first is None or last is None:
        return ""
    return f", {what} {first:.4g} -> {last:.4g}"


# --------------------------------------------------------------------------- train grpo


def _grpo_settings() -> type[Any]:
    from embodia.policies.recipes.grpo_trainer import GRPOSettings

    return GRPOSettings


TRAIN_GRPO_OPTIONS: OptionTable = {
    "policy": FieldOption("The model to train: hf:DIR, a local transformers causal LM or VLM."),
    "env": FieldOption(
        "A registered gymnasium id whose observations a chat policy reads, e.g. embodia/DSR-v0."
    ),
    "env_option": OWN,
    "advantage": FieldOption("Advantage estimator: group, batch, none or durian."),
    "steps": FieldOption("Optimiser steps, one rollout batch each."),
    "out": OWN,
    "resume": OWN,
    "group_size": FieldOption("G: episodes sampled per reset seed (at least 2)."),
    "prompts_per_step": FieldOption("P: reset seeds per rollout batch (P x G episodes)."),
    "max_new_tokens": FieldOption("Most tokens sampled per reply."),
    "max_turns": FieldOption("Turns after which an episode is cut (1: one reply per episode)."),
    "credit": FieldOption(
        "How an episode's rewards reach its turns: episode (its total) or turn (each turn's reward-to-go)."
    ),
    "learning_rate": FieldOption("AdamW's learning rate (TRL's default; tiny models need far more)."),
    "loss_type": FieldOption("Aggregation of the per-token loss: grpo, bnpo, dr_grpo or dapo."),
    "epsilon": FieldOption("The ratio is clipped below at 1 - epsilon."),
    "epsilon_high": FieldOption(
        "The ratio is clipped above at 1 + epsilon-high (default: epsilon; DAPO: 0.28)."
    ),
    "beta": FieldOption("Weight of the k3 KL to the starting model (0: no reference model)."),
    "kl_importance_weight": FieldOption("Weight the per-token KL by the ratio (DeepSeek-V3.2)."),
    "temperature": FieldOption("Sampling temperature (the loss's logprobs use the same)."),
    "num_iterations": FieldOption("Optimisation passes over each rollout batch, against its old logprobs."),
    "gradient_accumulation_steps": FieldOption("Micro-batches summed into one optimiser step."),
    "max_grad_norm": FieldOption("Clip of the gradient's global norm (0: no clipping)."),
    "max_completion_length": FieldOption(
        "dr_grpo's constant per-sequence denominator (default: max-new-tokens)."
    ),
    "dynamic_sampling": FieldOption("Drop the groups whose rewards are all equal (DAPO)."),
    "durian_levels": FieldOption("Durian's K: difficulty levels the prompts are bucketed into."),
    "durian_alpha": FieldOption("Durian's weight of image entropy against reasoning uncertainty."),
    "durian_uncertainty": FieldOption("Durian's reasoning uncertainty: entropy or probability."),
    "first_seed": FieldOption("Reset seed of the first prompt (step s uses first-seed + s*P onwards)."),
    "eval_prompts": FieldOption("Held-out reset seeds scored at the start and the end (0: none)."),
    "eval_samples": FieldOption("Episodes per held-out seed (their mean reward counts)."),
    "eval_temperature": FieldOption("Held-out sampling temperature (0: greedy)."),
    "eval_first_seed": FieldOption("First held-out reset seed."),
    "eval_env_option": OWN,
    "eval_every": FieldOption("Also evaluate every this many steps (0: only at the start and the end)."),
    "num_envs": FieldOption("Sub-envs of the rollout vector env."),
    "images": FieldOption("Show the env's pictures (false: its text view, for a text-only model)."),
    "vectorization": FieldOption("sync, or async (env steps in worker processes)."),
    "lora_r": FieldOption("LoRA rank; 0 trains every weight."),
    "lora_alpha": FieldOption("LoRA's scale numerator."),
    "seed": FieldOption("Seed of sampling and initialisation."),
    "backend": OWN,
    "num_workers": OWN,
    "address": OWN,
    "worker_cpus": OWN,
    "worker_gpus": OWN,
}


@settings_command(
    train_app, "grpo", _grpo_settings, TRAIN_GRPO_OPTIONS, hidden=("env_options", "eval_env_options")
)
def train_grpo(
    options: dict[str, Any],
    out: OutOption,
    env_option: EnvOptionFlags = None,
    eval_env_option: Annotated[
        list[str] | None,
        typer.Option(
            "--eval-env-option",
            metavar="KEY=VALUE",
            help="An env option that differs for the held-out evaluation, e.g. instance_seed=7; repeatable.",
        ),
    ] = None,
    resume: ResumeOption = False,
    backend: backends.BackendOption = "local",
    num_workers: backends.NumWorkersOption = None,
    address: backends.AddressOption = None,
    worker_cpus: backends.WorkerCpusOption = 1.0,
    worker_gpus: backends.WorkerGpusOption = 0.0,
) -> None:
    """Train a policy by GRPO over rollouts in a gymnasium env (group, batch, none or Durian advantages).

    With --backend ray each group of rollouts runs on a Ray worker that holds a copy of the
    policy (sent the trained weights every step); the optimisation runs here."""
    from embodia.policies.recipes.grpo_trainer import GRPOSettings, run_grpo

    with user_errors():
        _check_steps(options["steps"])
        env_options = with_dsr_prompt(options["env"], parse_env_options(env_option))
        eval_options = parse_env_options(eval_env_option, "--eval-env-option")
        settings = GRPOSettings(**options, env_options=env_options, eval_env_options=eval_options)
        where = backends.backend_from(backend, num_workers, address, worker_cpus, worker_gpus)
        rollouts_on = None if where.kind == "local" else where  # local: the batched engine, as before
        title = f"GRPO ({settings.advantage} advantages) of {settings.policy} on {settings.env}"
        with MetricsTable(title, GRPO_COLUMNS) as table:
            summary = run_grpo(settings, out, resume=resume, on_step=table.add, backend=rollouts_on)
    numbers = _change(summary["reward_first"], summary["reward_last"], "reward") + _change(
        summary["eval_reward_start"], summary["eval_reward_end"], "held-out reward"
    )
    _finish_line("GRPO done", out, summary, numbers)


# --------------------------------------------------------------------------- train sft


def _sft_settings() -> type[Any]:
    from embodia.policies.recipes.sft import SFTSettings

    return SFTSettings


TRAIN_SFT_OPTIONS: OptionTable = {
    "model": FieldOption(
        "The model to fine-tune: hf:DIR, a local causal LM with its tokenizer and chat template.",
        flag="--policy",
    ),
    "data_file": OWN,
    "env": OWN,
    "env_option": OWN,
    "records": OWN,
    "steps": OWN,
    "out": OWN,
    "resume": OWN,
    "eval_data_file": OWN,
    "epochs": FieldOption("Passes over the records (fractions allowed) when --steps is not given."),
    "learning_rate": FieldOption("AdamW's learning rate at the schedule's peak."),
    "lr_scheduler": FieldOption("linear, cosine, constant or constant_with_warmup."),
    "warmup_steps": FieldOption("Steps over which the learning rate rises from 0 to its peak."),
    "weight_decay": FieldOption("AdamW's decoupled weight decay."),
    "batch_size": FieldOption("Records per forward pass."),
    "gradient_accumulation": FieldOption("Forward passes summed into one optimiser step."),
    "max_length": FieldOption("Tokens per record (longer ones are cut), or per packed row."),
    "packing": FieldOption("Pack several records into each row of max-length tokens."),
    "completion_only_loss": FieldOption(
        "Train on the reply only (the last assistant message), or on every token.",
        "--completion-only-loss/--full-loss",
    ),
    "lora_r": FieldOption("LoRA rank; 0 trains every weight."),
    "lora_alpha": FieldOption("LoRA scaling numerator (the update is scaled by alpha / r)."),
    "lora_dropout": FieldOption("Dropout on the LoRA branch's input."),
    "lora_targets": FieldOption(
        "A module LoRA adapts, e.g. q_proj; repeatable (default: every linear layer).", "--lora-target"
    ),
    "logging_steps": FieldOption("Steps between two metrics lines.", default=1),
    "save_steps": FieldOption("Steps between two checkpoints (a resume continues from the last)."),
    "seed": FieldOption("Seed of the data order, dropout and LoRA initialisation."),
}


def sft_records(env: str, options: Mapping[str, Any], records: int) -> list[Any]:
    """``records`` generated records of ``env`` as chat records, with the prompts ``train grpo``
    shows for the same options: for ``embodia/DSR-v0`` solved instances (instance seeds
    0..records-1, one record each), for ``embodia/ActiveMappingWaypoint-v0`` teacher episodes
    (reset seeds 0..records-1, one record per decision; policies.recipes.solutions)."""
    if env not in GENERATED_ENVS:
        raise EmbodiaError(
            f"train sft --env generates records of {' and '.join(GENERATED_ENVS)} only, not {env}: "
            "give the records of another env as --data FILE.jsonl"
        )
    if not 1 <= records <= MAX_RECORDS:
        raise EmbodiaError(f"--records must be in 1..{MAX_RECORDS}, got {records}")
    if env == WAYPOINT_ENV:
        from embodia.policies.recipes.solutions import waypoint_solution_records

        return waypoint_solution_records(range(records), env_options=options)
    from embodia.policies.recipes.solutions import dsr_solution_records

    unused = sorted(set(options) - set(SFT_ENV_OPTIONS))
    if unused:
        raise EmbodiaError(
            f"train sft --env {env} reads only the env options {', '.join(SFT_ENV_OPTIONS)}, "
            f"not {', '.join(unused)}"
        )
    prompt = with_dsr_prompt(env, {})
    for key, value in prompt.items():
        if options.get(key, value) != value:
            raise EmbodiaError(
                f"the generated solutions are written for --env-option {key}={value}, not {options[key]!r}"
            )
    chosen = {k: options[k] for k in ("operation", "length", "instance_seed") if k in options}
    return list(dsr_solution_records(range(records), **chosen))


@settings_command(
    train_app, "sft", _sft_settings, TRAIN_SFT_OPTIONS, hidden=("data", "eval_data", "max_steps")
)
def train_sft(
    options: dict[str, Any],
    out: OutOption,
    data_file: Annotated[
        Path | None,
        typer.Option(
            "--data", help="Chat or prompt/completion records, one JSON object a line (or use --env)."
        ),
    ] = None,
    env: Annotated[
        str | None,
        typer.Option(
            "--env",
            help=f"Generate the records for this env: solved instances of {DSR_ENV}, "
            f"teacher episodes of {WAYPOINT_ENV}.",
        ),
    ] = None,
    env_option: EnvOptionFlags = None,
    records: Annotated[
        int,
        typer.Option(
            "--records",
            help="How many records --env generates: DSR solved instances (instance seeds 0..N-1), "
            "or waypoint teacher episodes (reset seeds 0..N-1, one record per decision).",
        ),
    ] = 256,
    steps: Annotated[
        int | None, typer.Option("--steps", help="Optimiser steps (default: as many as --epochs make).")
    ] = None,
    eval_data_file: Annotated[
        Path | None,
        typer.Option("--eval-data", help="Held-out records, their loss measured before and after."),
    ] = None,
    resume: ResumeOption = False,
) -> None:
    """Fine-tune a policy on chat records: a JSONL file, or solved instances of an env (SFT with TRL)."""
    from embodia.policies.recipes.sft import SFTSettings, run_sft

    with user_errors():
        _check_steps(steps)
        if (data_file is None) == (env is None):
            raise EmbodiaError(
                "give the records as --data FILE.jsonl or generate them with --env ID (one of the two)"
            )
        if env is None and env_option:
            raise EmbodiaError("--env-option needs --env (the records of --data are used as they are)")
        data: str | tuple[Any, ...] = (
            str(data_file)
            if data_file is not None
            else tuple(sft_records(str(env), parse_env_options(env_option), records))
        )
        settings = SFTSettings(
            **options,
            data=data,
            eval_data=None if eval_data_file is None else str(eval_data_file),
            max_steps=steps or 0,
        )
        with MetricsTable(f"SFT of {settings.model}", SFT_COLUMNS) as table:
            summary = run_sft(settings, out, resume=resume, on_log=table.add)
    numbers = _change(summary["train_loss_first"], summary["train_loss_last"], "loss")
    if summary.get("eval_loss") is not None:
        numbers += _change(summary["eval_loss_start"], summary["eval_loss"], "held-out loss")
    _finish_line("SFT done", out, summary, numbers)


# --------------------------------------------------------------------------- train sxs


def _sxs_settings() -> type[Any]:
    from embodia.policies.recipes.sxs_train import SxSTrainSettings

    return SxSTrainSettings


TRAIN_SXS_OPTIONS: OptionTable = {
    "model": FieldOption("The model to train: hf:DIR.", flag="--policy"),
    "source": FieldOption("Items: a puzzle (maze, sudoku, frozenlake, tsp) or dsr:OPERATION."),
    "difficulty": FieldOption("The puzzle's size, or the DSR length."),
    "out": OWN,
    "resume": OWN,
    "sft_items": FieldOption("Reference trajectories to fine-tune on."),
    "sft_epochs": FieldOption("Passes over them."),
    "sft_learning_rate": FieldOption("SFT's learning rate."),
    "sft_batch_size": FieldOption("Records per SFT step."),
    "grpo_steps": FieldOption("GRPO steps after SFT (0: SFT only)."),
    "grpo_prompts_per_step": FieldOption("Items per GRPO step."),
    "grpo_group_size": FieldOption("Replies sampled per item."),
    "grpo_learning_rate": FieldOption("GRPO's learning rate."),
    "max_new_tokens": FieldOption("Most tokens of a sampled reply."),
    "latency_weight": FieldOption("Weight of the content-latency term of the reward (0: accuracy alone)."),
    "eval_prompts": FieldOption("Held-out items scored at GRPO's start and end."),
    "lora_r": FieldOption("LoRA rank; 0 trains every weight."),
    "lora_alpha": FieldOption("LoRA's scale numerator."),
    "seed": FieldOption("Seed of sampling and initialisation."),
}


@settings_command(train_app, "sxs", _sxs_settings, TRAIN_SXS_OPTIONS)
def train_sxs(options: dict[str, Any], out: OutOption, resume: ResumeOption = False) -> None:
    """Train a policy to think and speak interleaved (SxS): SFT on reference trajectories, then
    GRPO on the spoken answer's accuracy, optionally paid for speaking early."""
    from embodia.policies.recipes.sxs_train import SxSTrainSettings, run_sxs_train

    with user_errors():
        settings = SxSTrainSettings(**options)
        summary = run_sxs_train(settings, out, resume=resume)
    sft, grpo = summary["sft"], summary["grpo"] or {"steps": 0, "reward_first": None, "reward_last": None}
    numbers = _change(sft["train_loss_first"], sft["train_loss_last"], "SFT loss") + _change(
        grpo["reward_first"], grpo["reward_last"], "reward"
    )
    latency = summary["content_latency_last"]
    if latency:
        numbers += (
            f", last step: accuracy {latency['env/accuracy']:.2f}, "
            f"first speech at {latency['env/first_speak_fraction']:.0%} of the reply"
        )
    _finish_line("SxS training done", out, {"steps": sft["steps"] + (grpo["steps"] or 0), **summary}, numbers)


# --------------------------------------------------------------------------- train byorn


def _byorn_settings() -> type[Any]:
    from embodia.policies.recipes.byorn import BYORnSettings

    return BYORnSettings


TRAIN_BYORN_OPTIONS: OptionTable = {
    "model": FieldOption(
        "The pretrained VLM to fine-tune and score with: hf:DIR (an image-text-to-text directory).",
        flag="--policy",
    ),
    "data_file": OWN,
    "out": OWN,
    "resume": OWN,
    "threshold": FieldOption("Flag a record whose mean reply log-prob per token is below this (nats)."),
    "quantile": FieldOption("Instead of --threshold, flag this share of the records, the lowest-scoring."),
    "judge": FieldOption("A --policy spec asked whether each reply fits; a 'no' flags the record."),
    "replace": FieldOption("What a flagged record trains on: current, pretrained or drop."),
    "regenerate_every": FieldOption("Steps between two refreshes of the generated replies (0: once)."),
    "max_new_tokens": FieldOption("Tokens a generated reply may have."),
    "score_batch_size": FieldOption("Records per forward pass when scoring and generating."),
    "epochs": FieldOption("Passes over the records when --max-steps is 0."),
    "max_steps": FieldOption("Optimiser steps (0: as many as --epochs make)."),
    "learning_rate": FieldOption("AdamW's learning rate at the schedule's peak."),
    "batch_size": FieldOption("Records per forward pass."),
    "max_length": FieldOption("Tokens per record."),
    "lora_r": FieldOption("LoRA rank; 0 trains every weight."),
    "lora_alpha": FieldOption("LoRA scaling numerator."),
    "logging_steps": FieldOption("Steps between two metrics lines."),
    "save_steps": FieldOption("Steps between two checkpoints (a resume continues from the last)."),
    "seed": FieldOption("Seed of the data order and LoRA initialisation."),
}


@settings_command(train_app, "byorn", _byorn_settings, TRAIN_BYORN_OPTIONS, hidden=("data",))
def train_byorn(
    options: dict[str, Any],
    out: OutOption,
    data_file: Annotated[
        Path,
        typer.Option("--data", help="Chat records with images, one JSON object a line (may be poisoned)."),
    ],
    resume: ResumeOption = False,
) -> None:
    """Fine-tune a VLM on data that may be poisoned (BYORn): replies implausible to the
    pretrained model are flagged and trained on as the model itself would answer."""
    from embodia.policies.recipes.byorn import BYORnSettings, run_byorn

    with user_errors():
        settings = BYORnSettings(**options, data=str(data_file))
        summary = run_byorn(settings, out, resume=resume)
    sft = summary["sft"]
    numbers = f", {summary['flagged']} of {summary['records']} records flagged" + _change(
        sft["train_loss_first"], sft["train_loss_last"], "loss"
    )
    _finish_line("BYORn done", out, {"steps": sft["steps"], **summary}, numbers)


# --------------------------------------------------------------------------- train proact


def _proact_settings() -> type[Any]:
    from embodia.policies.recipes.proact_sft import ProactSFTSettings

    return ProactSFTSettings


TRAIN_PROACT_OPTIONS: OptionTable = {
    "model": FieldOption("The VLM to fine-tune: hf:DIR (an image-text-to-text directory).", flag="--policy"),
    "streams": FieldOption(
        "A training stream, e.g. procedural:arena,seed=3,duration=30; repeatable.", flag="--stream"
    ),
    "scenarios": FieldOption(
        "Labels to train on: solo, co-commentary, guidance; repeatable.", flag="--scenario"
    ),
    "out": OWN,
    "resume": OWN,
    "fps": FieldOption("Frames per 1-second chunk."),
    "window": FieldOption("Seconds per batch: consecutive seconds of one clip."),
    "epochs": FieldOption("Passes over the seconds when --max-steps is 0."),
    "max_steps": FieldOption("Optimiser steps (0: as many as --epochs make)."),
    "learning_rate": FieldOption("AdamW's learning rate at the schedule's peak."),
    "lora_r": FieldOption("LoRA rank; 0 trains every weight."),
    "lora_alpha": FieldOption("LoRA scaling numerator."),
    "gate_weight": FieldOption("Weight of the gate's loss beside the LM loss."),
    "head_warmup_epochs": FieldOption("Epochs fitting the head alone on the start model first (0: none)."),
    "layer": FieldOption("The hidden state the gate reads."),
    "threshold": FieldOption("The saved gate's speaking threshold."),
    "logging_steps": FieldOption("Steps between two metrics lines."),
    "save_steps": FieldOption("Steps between two checkpoints (a resume continues from the last)."),
    "seed": FieldOption("Seed of the clip order, head and LoRA initialisation."),
}


@settings_command(train_app, "proact", _proact_settings, TRAIN_PROACT_OPTIONS)
def train_proact(options: dict[str, Any], out: OutOption, resume: ResumeOption = False) -> None:
    """Fine-tune a VLM on live-commentary streams with its speak gate trained jointly
    (Proact-VL); the gate it writes runs as --agent gate:OUT/gate in `embodia stream run`."""
    from embodia.policies.recipes.proact_sft import ProactSFTSettings, run_proact_sft

    with user_errors():
        settings = ProactSFTSettings(**options)
        summary = run_proact_sft(settings, out, resume=resume)
    sft = summary["sft"]
    numbers = _change(sft["train_loss_first"], sft["train_loss_last"], "loss") + _change(
        summary["gate_loss_first"], summary["gate_loss_last"], "gate loss"
    )
    _finish_line("Proact-VL fine-tune done", out, {"steps": sft["steps"], **summary}, numbers)
    console.print(
        f"the gate: [bold]--agent gate:{escape(summary['gate'])}[/]", highlight=False, soft_wrap=True
    )


# --------------------------------------------------------------------------- train air


def _air_settings() -> type[Any]:
    from embodia.policies.recipes.air import AIRSettings

    return AIRSettings


TRAIN_AIR_OPTIONS: OptionTable = {
    "model": FieldOption("The model whose attention heads score the data: hf:DIR.", flag="--policy"),
    "data_file": OWN,
    "out": OWN,
    "resume": OWN,
    "head_fraction": FieldOption("Share of the heads, the top retrieval scorers, to disable."),
    "min_heads": FieldOption("Fewest heads to disable."),
    "probe": FieldOption(
        "Measure retrieval on the samples themselves (data) or on random copy probes (copies)."
    ),
    "probes": FieldOption("Copy probes to measure on."),
    "probe_haystack": FieldOption("Tokens of a copy probe's haystack."),
    "probe_needle": FieldOption("Tokens of a copy probe's needle."),
    "sample_score": FieldOption(
        "A sample's score: mean_step or relative (the loss rise over the base loss)."
    ),
    "select_fraction": FieldOption("Share of the samples, the top scorers, written to selected.jsonl."),
    "weighting": FieldOption("Step weights: softmax or minmax of the step scores."),
    "temperature": FieldOption("The softmax's temperature."),
    "max_length": FieldOption("Tokens per sample."),
    "batch_size": FieldOption("Samples per forward pass."),
    "seed": FieldOption("Seed of the copy probes."),
}


@settings_command(train_app, "air", _air_settings, TRAIN_AIR_OPTIONS, hidden=("data",))
def train_air(
    options: dict[str, Any],
    out: OutOption,
    data_file: Annotated[
        Path,
        typer.Option(
            "--data", help="Chat or prompt/completion records whose completions are reasoning steps."
        ),
    ],
    resume: ResumeOption = False,
) -> None:
    """Score reasoning data by attention-head influence (AIR): the top samples for
    distillation, and every record with step weights for `embodia train sft`."""
    from embodia.policies.recipes.air import SELECTED, WEIGHTED, AIRSettings, run_air

    with user_errors():
        settings = AIRSettings(**options, data=str(data_file))
        summary = run_air(settings, out, resume=resume)
    heads = ", ".join(f"{layer}.{head}" for layer, head in summary["critical_heads"])
    console.print(
        f"AIR done: {summary['samples']} samples scored with heads {heads} disabled (layer.head); "
        f"{len(summary['selected'])} selected in {bold(out / SELECTED)}; train on the step weights "
        f"with [bold]embodia train sft --data {escape(str(out / WEIGHTED))}[/]",
        highlight=False,
        soft_wrap=True,
    )


# --------------------------------------------------------------------------- train maa


def _maa_settings() -> type[Any]:
    from embodia.evals.robustness import MAASettings

    return MAASettings


TRAIN_MAA_OPTIONS: OptionTable = {
    "encoder": FieldOption(
        "The frozen vision encoder: a transformers directory (ViT, CLIP or SigLIP vision tower)."
    ),
    "data": FieldOption("Clean images: clevr (generated close-ups of puzzle renders) or a folder of images."),
    "images": FieldOption("How many clean images."),
    "out": OWN,
    "resume": OWN,
    "corruptions": FieldOption(
        "A corruption to train on (gaussian_noise, gaussian_blur, defocus_blur, jpeg, fog, "
        "low_light); repeatable, default all.",
        flag="--corruption",
    ),
    "severities": FieldOption("A severity (1-5) to train on; repeatable, default all.", flag="--severity"),
    "clean_share": FieldOption("Share of the training copies left clean."),
    "rank": FieldOption("The adapters' bottleneck width."),
    "layers": FieldOption(
        "A block to adapt (negative from the last); repeatable, default every block.", flag="--layer"
    ),
    "adversarial_weight": FieldOption(
        "Weight of the adversarial manifold term (0: Euclidean alignment only)."
    ),
    "objective": FieldOption("The adversarial objective: nonsaturating or lsgan."),
    "adversarial_layers": FieldOption(
        "A block whose tokens a discriminator judges; repeatable, default the last.",
        flag="--adversarial-layer",
    ),
    "discriminator_width": FieldOption("Hidden width of each token discriminator."),
    "steps": FieldOption("Optimiser steps."),
    "batch_size": FieldOption("Images per step."),
    "learning_rate": FieldOption("The adapters' Adam learning rate."),
    "discriminator_learning_rate": FieldOption("The discriminators' Adam learning rate."),
    "log_every": FieldOption("Steps between two metrics lines."),
    "save_every": FieldOption("Steps between two checkpoints (a resume continues from the last)."),
    "seed": FieldOption("Seed of the images, the corruptions drawn and the initialisation."),
}
MAA_COLUMNS: tuple[Column, ...] = (
    ("step", "step"),
    ("distill", "distill_loss"),
    ("adversarial", "adversarial_loss"),
    ("D loss", "discriminator_loss"),
    ("D accuracy", "discriminator_accuracy"),
    ("images/s", "images_per_s"),
)


MAAOutOption = Annotated[
    Path,
    typer.Option(
        "--out", help="Run folder (metrics.jsonl, checkpoints/, adapters/, summary.json), e.g. runs/NAME."
    ),
]


@settings_command(train_app, "maa", _maa_settings, TRAIN_MAA_OPTIONS)
def train_maa(options: dict[str, Any], out: MAAOutOption, resume: ResumeOption = False) -> None:
    """Train MAA adapters that make a frozen vision encoder robust to corrupted images: paired
    feature distillation of corrupted copies onto clean ones plus a token-level adversarial
    manifold term; only the adapters are saved (OUT/adapters)."""
    from embodia.evals.robustness import MAASettings, run_maa

    with user_errors():
        settings = MAASettings(**options)
        with MetricsTable(f"MAA adapters: {out}", MAA_COLUMNS) as table:
            summary = run_maa(settings, out, resume=resume, on_record=table.add)
    console.print(
        f"MAA done: {summary['steps']} steps"
        + _change(summary["distill_loss_first"], summary["distill_loss_last"], "distillation loss")
        + f"; {summary['adapter_parameters']} adapter weights in {bold(summary['adapters'])} "
        "(attach them with embodia.perception.adapters.maa.load_adapters)",
        highlight=False,
        soft_wrap=True,
    )


# --------------------------------------------------------------------------- train fusion


def _fusion_settings() -> type[Any]:
    from embodia.perception.fusion.training import FusionTrainSettings

    return FusionTrainSettings


TRAIN_FUSION_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "steps": FieldOption("Optimiser steps."),
    "kinds": FieldOption(
        "A pair kind to train and evaluate on: ir_vis, medical or sim_depth; repeatable (default: all).",
        flag="--kind",
    ),
    "batch_size": FieldOption("Crops per step."),
    "crop": FieldOption("Pixels per side of a training crop."),
    "learning_rate": FieldOption("Adam's learning rate."),
    "train_pairs": FieldOption("Training pairs of each kind, the crops drawn from them."),
    "pair_size": FieldOption("Pixels per side of a training pair."),
    "eval_pairs": FieldOption("Held-out pairs of each kind in the metric table."),
    "eval_size": FieldOption("Pixels per side of a held-out pair."),
    "width": FieldOption("Channels of the condition network."),
    "stride": FieldOption("Pixels per side of a decision cell (1, 2, 4 or 8)."),
    "patch": FieldOption("Pixels per side of a spectral patch (8, 16 or 32)."),
    "bands": FieldOption("Octave bands of the spectral conditions."),
    "prior": FieldOption("a0 of the symmetric Beta(a0, a0) prior on the policy."),
    "intensity_weight": FieldOption("Weight of mean |F - max(A, B)|."),
    "gradient_weight": FieldOption("Weight of mean | |grad F| - max(|grad A|, |grad B|) |."),
    "ssim_weight": FieldOption("Weight of (1 - SSIM(F, A)) + (1 - SSIM(F, B))."),
    "kl_weight": FieldOption("Weight of the policy's KL to the prior."),
    "agree_share": FieldOption("Share of the crops given a rectangle where B is A."),
    "log_every": FieldOption("Steps per metrics.jsonl line."),
    "checkpoint_every": FieldOption("Steps between two checkpoints (a resume continues from the last)."),
    "seed": FieldOption("Seed of the pairs, crops, draws and initial weights."),
}


@settings_command(train_app, "fusion", _fusion_settings, TRAIN_FUSION_OPTIONS)
def train_fusion(options: dict[str, Any], out: OutOption, resume: ResumeOption = False) -> None:
    """Train IDEAL image fusion (Beta contribution policies over spatial and spectral
    conditions) on generated pairs, and compare it with the average, max-abs and Laplacian
    baselines on held-out pairs (EN, SD, SF, MI, SCD, VIF, Qabf, SSIM, AG)."""
    from embodia.perception.fusion.training import FusionTrainSettings, run_fusion_training

    with user_errors():
        settings = FusionTrainSettings(**options)
        columns = (("step", "step"), ("loss", "loss"), ("KL", "kl"), ("|w - 0.5|", "weight_spread"))
        with MetricsTable("IDEAL fusion training", columns) as table:
            summary = run_fusion_training(settings, out, resume=resume, on_step=table.add)
    for kind, methods in summary["table"].items():
        held_out = Table(
            title=f"held-out {kind} ({summary['held_out_pairs'][kind]} pairs)", title_justify="left"
        )
        held_out.add_column("metric")  # a metric a row, a method a column: fits 80 columns
        for method in methods:
            held_out.add_column(method, justify="right")
        for metric in summary["metrics"]:
            held_out.add_row(metric, *(_cell(values[metric]) for values in methods.values()))
        console.print(held_out)
    console.print(
        f"IDEAL fusion done: {summary['steps']} steps"
        + _change(summary["loss_first"], summary["loss_last"], "loss")
        + f"; run folder {bold(out)}; the model in {bold(summary['model'])} "
        "(load it with embodia.perception.fusion.model.load_ideal)",
        highlight=False,
        soft_wrap=True,
    )


# --------------------------------------------------------------------------- train tokenizer


def _tokenizer_settings() -> type[Any]:
    from embodia.evals.tokenizer_study import TokenizerStudySettings

    return TokenizerStudySettings


TRAIN_TOKENIZER_OPTIONS: OptionTable = {
    "out": OWN,
    "resume": OWN,
    "source": FieldOption("Images: clevr (puzzle renders), sim (simulator views) or mixed (half each)."),
    "train_images": FieldOption("Training images."),
    "eval_images": FieldOption("Held-out images (other puzzle seeds, houses never trained on)."),
    "height": FieldOption("Image height in pixels (a multiple of the stride)."),
    "width": FieldOption("Image width in pixels (a multiple of the stride)."),
    "quantizer": FieldOption("lfq (signs of the latent) or bsq (signs on the unit sphere)."),
    "bits": FieldOption("K: bits per code."),
    "levels": FieldOption("M: codes per grid position, one per encoder level (deepest first)."),
    "channels": FieldOption(
        "Width of an encoder stage, a multiple of 8; repeatable (the stride is 2^stages).", flag="--channel"
    ),
    "commitment_weight": FieldOption("Weight of the commitment loss."),
    "entropy_weight": FieldOption("Weight of the entropy loss."),
    "diversity_gamma": FieldOption("gamma: weight of the codebook entropy in the entropy loss."),
    "inv_temperature": FieldOption("1/tau of p(c|z)."),
    "entropy_group_size": FieldOption("Bits per group of BSQ's grouped entropy (default: exact over 2^K)."),
    "steps": FieldOption("Tokenizer optimiser steps."),
    "batch_size": FieldOption("Images per step."),
    "learning_rate": FieldOption("Adam's peak learning rate (cosine decay)."),
    "warmup_steps": FieldOption("Steps of linear warm-up."),
    "log_every": FieldOption("Steps per metrics.jsonl line."),
    "eval_every": FieldOption("Steps between two held-out measurements."),
    "checkpoint_every": FieldOption("Steps between two checkpoints (a resume continues from the last)."),
    "ar_steps": FieldOption("Steps of the unified AR demonstration after the tokenizer (0: none)."),
    "ar_group": FieldOption("g: the AR model writes g x g grid positions per step."),
    "ar_width": FieldOption("The AR transformer's width."),
    "ar_layers": FieldOption("The AR transformer's layers."),
    "ar_heads": FieldOption("The AR transformer's attention heads."),
    "ar_batch_size": FieldOption("Descriptions per AR step."),
    "ar_learning_rate": FieldOption("The AR model's peak learning rate."),
    "ar_flip_probability": FieldOption(
        "Share of input bits flipped in AR training (bitwise self-correction)."
    ),
    "ar_temperature": FieldOption("Sampling temperature of the AR model's pictures (0: greedy)."),
    "threads": FieldOption("Torch CPU threads."),
    "seed": FieldOption("Seed of the images, batches and initial weights."),
}
TOKENIZER_COLUMNS: tuple[Column, ...] = (
    ("step", "step"),
    ("loss", "loss"),
    ("train PSNR", "train_psnr"),
    ("held-out PSNR", "eval_psnr"),
    ("code usage", "eval_group_code_usage"),
    ("AR bits CE", "ar_bit_cross_entropy"),
    ("held-out AR CE", "eval_ar_bit_cross_entropy"),
)


@settings_command(train_app, "tokenizer", _tokenizer_settings, TRAIN_TOKENIZER_OPTIONS)
def train_tokenizer(options: dict[str, Any], out: OutOption, resume: ResumeOption = False) -> None:
    """Train the bitwise (LFQ/BSQ) visual tokenizer on puzzle renders and simulator views and
    measure it on held-out ones against the mean-image and downsample baselines; with
    --ar-steps, then train a tiny unified AR model that writes codes from scene descriptions."""
    from embodia.evals.tokenizer_study import TokenizerStudySettings, run_tokenizer_study

    with user_errors():
        settings = TokenizerStudySettings(**options)
        with MetricsTable(f"bitwise tokenizer: {out}", TOKENIZER_COLUMNS) as table:
            summary = run_tokenizer_study(settings, out, resume=resume, on_record=table.add)
    held_out, base = summary["held_out"], summary["baselines"]
    console.print(
        f"tokenizer done: {summary['steps']} steps, {summary['bits_per_image']} bits per image; held-out "
        f"PSNR {held_out['psnr']:.2f} dB, SSIM {held_out['ssim']:.3f} (untrained "
        f"{summary['untrained']['psnr']:.2f} dB; mean image {base['mean_image']['psnr']:.2f} dB; "
        f"downsample at {base['downsample']['bits_per_image']} bits {base['downsample']['psnr']:.2f} dB); "
        f"code usage {held_out['group_code_usage']:.2f}; the tokenizer in {bold(summary['tokenizer'])} "
        "(load it with embodia.perception.tokenizers.autoencoder.load_tokenizer)",
        highlight=False,
        soft_wrap=True,
    )
    ar = summary["ar"]
    if ar is not None:
        console.print(
            f"unified AR: held-out bit cross entropy {ar['bit_cross_entropy']:.3f} nats "
            f"(bit-frequency baseline {ar['baseline_bit_cross_entropy']:.3f}), bit accuracy "
            f"{ar['bit_accuracy']:.3f}; samples in {bold(Path(out) / 'ar_samples.png')}",
            highlight=False,
            soft_wrap=True,
        )
