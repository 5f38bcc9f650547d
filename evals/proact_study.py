"""Proact-VL fine-tuned against the frozen-feature gate and the event heuristic, on held-out
procedural streams.

Three stream agents, on the same held-out streams (:func:`~embodia.evals.live_run.run_live`,
the reference's counting of the Live Gaming metrics, PAUC by the lexical judge):

- ``finetuned``: the VLM LoRA-fine-tuned with its gate (:mod:`embodia.policies.recipes.proact_sft`),
  which also writes the lines;
- ``frozen_gate``: the gate head alone trained on the untouched VLM's flag features
  (:func:`~embodia.policies.speak_gate.fit_gate`) on the same training streams, lines from
  that VLM;
- ``heuristic``: the event heuristic, lines from the HUD commentator.

Besides the Live Gaming metrics of each run, ``decision_f1`` scores the seconds each agent
decided to speak in, whatever its line said: the benchmark's F1 counts a second whose line
is the silence filler (``" ..."``) as silent.

The run folder: ``finetune/`` and ``frozen_gate/`` (the two trainings), ``runs/AGENT/N/`` (one
stream run per agent and held-out stream), ``evals.jsonl`` (one line per finished stream
run: agent, stream, F1, TimeDiff, PAUC) and ``summary.json`` (each agent's means);
``resume=True`` continues where it was cut.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodia.core.limits import check_range, check_seed
from embodia.core.runs import RunFolder, runner
from embodia.envs.streams.sources import check_scenario
from embodia.errors import EmbodiaError
from embodia.evals.live_run import LiveSettings, run_live
from embodia.policies.recipes.proact_sft import ProactSFTSettings, run_proact_sft
from embodia.policies.spec import parse_policy_spec

EVALS = "evals.jsonl"
SUMMARY = "summary.json"
AGENTS = ("finetuned", "frozen_gate", "heuristic")
METRICS = ("f1_macro", "timediff_mean", "pauc_omega_0.5", "pred_speaking_rate", "label_speaking_rate")
REPORTED = (*METRICS, "decision_f1")


class ProactStudyError(EmbodiaError, ValueError):
    """Study settings that cannot be used; the message names them."""


@dataclass(frozen=True)
class ProactStudySettings:
    """The study (module docstring): training and held-out streams are procedural games."""

    model: str
    """The VLM both gates start from: ``hf:DIR``."""
    game: str = "arena"
    scenario: str = "solo"
    train_seeds: tuple[int, ...] = tuple(range(8))
    held_out_seeds: tuple[int, ...] = (100, 101, 102, 103)
    duration: int = 30
    """Seconds per stream."""
    epochs: float = 3.0
    learning_rate: float = 5e-4
    lora_r: int = 8
    window: int = 15
    gate_epochs: int = 100
    """Epochs of the frozen-feature gate's head training."""
    finetune: Mapping[str, Any] = field(default_factory=dict)
    """Fine-tuning settings besides the shared ones (e.g. ``{"gate_weight": 5.0}``)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if parse_policy_spec(self.model)[0] != "hf":
            raise ProactStudyError(f"the study trains a local VLM: hf:DIR, got {self.model!r}")
        check_scenario(self.scenario)
        if not self.train_seeds or not self.held_out_seeds:
            raise ProactStudyError("give training and held-out stream seeds")
        if set(self.train_seeds) & set(self.held_out_seeds):
            raise ProactStudyError("a held-out stream is also a training stream: use other seeds")
        check_range("duration", self.duration, 2, 14_400, ProactStudyError)
        check_range("gate_epochs", self.gate_epochs, 1, 100_000, ProactStudyError)
        check_seed("seed", self.seed, ProactStudyError)
        self.finetune_settings()

    def spec(self, seed: int) -> str:
        return f"procedural:{self.game},seed={seed},duration={self.duration}"

    def finetune_settings(self) -> ProactSFTSettings:
        values: dict[str, Any] = {
            "model": self.model,
            "streams": tuple(self.spec(s) for s in self.train_seeds),
            "scenarios": (self.scenario,),
            "window": self.window,
            "epochs": self.epochs,
            "learning_rate": self.learning_rate,
            "lora_r": self.lora_r,
            "seed": self.seed,
        }
        try:
            return ProactSFTSettings(**{**values, **self.finetune})
        except TypeError as error:
            raise ProactStudyError(f"finetune: {error}") from error


def decision_f1(run: Path) -> float:
    """F1 of the seconds the agent decided to speak in (its ``decisions.jsonl``: a speaker
    named), against the labelled seconds: the gate's own timing, whatever its lines say (the
    Live Gaming F1 drops seconds whose line is the silence filler)."""
    from embodia.core.runs import read_run_records
    from embodia.core.scores import f1

    spoke = {r["second"] for r in read_run_records(run / "decisions.jsonl") if r.get("speaker")}
    (label,) = read_run_records(run / "labels.jsonl")
    result = f1(spoke, {int(second) for second in label["label"]})
    return result["f1"] if result is not None else 0.0


@runner
def run_proact_study(settings: ProactStudySettings, out: Path, *, resume: bool = False) -> dict[str, Any]:
    """Train both gates, run the three agents on the held-out streams, and report (module
    docstring); returns the summary (also ``summary.json``)."""
    from embodia.policies.speak_gate import fit_gate

    folder = RunFolder(out, EVALS)
    finished = folder.start(settings, resume, SUMMARY)
    if finished is not None:
        return finished
    out = folder.out
    kept = folder.kept_records()
    done = {(r["agent"], r["stream"]): r for r in kept if "agent" in r}
    finetuned = run_proact_sft(
        settings.finetune_settings(), out / "finetune", resume=(out / "finetune").exists()
    )
    frozen = out / "frozen_gate"
    if not (frozen / "gate.json").is_file():
        fit_gate(
            parse_policy_spec(settings.model)[1],
            frozen,
            [settings.spec(s) for s in settings.train_seeds],
            scenario=settings.scenario,
            epochs=settings.gate_epochs,
            seed=settings.seed,
        )
    agents = {
        "finetuned": f"gate:{finetuned['gate']}",
        "frozen_gate": f"gate:{frozen}",
        "heuristic": "heuristic",
    }
    with folder.recording(kept, {"settings": folder.config}) as log:
        for name, agent in agents.items():
            for seed in settings.held_out_seeds:
                if (name, seed) in done:
                    continue
                where = out / "runs" / name / str(seed)
                summary = run_live(
                    LiveSettings(
                        source=settings.spec(seed), scenario=settings.scenario, agent=agent, video=False
                    ),
                    where,
                    resume=where.exists(),
                )
                line = {
                    "agent": name,
                    "stream": seed,
                    **{key: summary.get(key) for key in METRICS},
                    "decision_f1": decision_f1(where),
                }
                log.append(line)
                done[(name, seed)] = line
    result: dict[str, Any] = {
        "settings": folder.config,
        "finetune": {k: finetuned[k] for k in ("sft", "gate_loss_first", "gate_loss_last")},
    }
    for name in AGENTS:
        rows = [done[(name, seed)] for seed in settings.held_out_seeds]
        # a mean over the streams that have the metric (PAUC needs lines to compare)
        result[name] = {
            key: statistics.fmean(float(r[key]) for r in rows if r[key] is not None)
            if any(r[key] is not None for r in rows)
            else None
            for key in REPORTED
        }
        result[name]["per_stream_f1"] = [r["f1_macro"] for r in rows]
    folder.finish(SUMMARY, result)
    return result
