"""``embodia models tiny``: each kind builds, loads back offline and says "random weights"
wherever it shows (the command's lines, the model card, the marker, the backends' warning,
the policy's name and the records of a run); a rerun is a no-op; bad input is one line."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import yaml
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoModelForSequenceClassification,
    AutoProcessor,
    AutoTokenizer,
)
from typer.testing import CliRunner

from embodia.cli import app
from embodia.core.random_weights import BUILD_MARKER, random_weights_in
from embodia.core.runs import check_resumable, write_config
from embodia.errors import EmbodiaError
from embodia.policies.hf import HFPolicy
from embodia.policies.tiny_models import MODEL_CARD, build_tiny, build_tiny_chat_lm
from embodia.viewer.runs import discover

runner = CliRunner()

LOADERS = {
    "chat": (AutoModelForCausalLM, AutoTokenizer),
    "vlm": (AutoModelForImageTextToText, AutoProcessor),
    "nli": (AutoModelForSequenceClassification, AutoTokenizer),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Each kind built once by the command: ``{kind: (folder, output)}``."""
    root = tmp_path_factory.mktemp("models")
    built = {}
    for kind in LOADERS:
        out = root / f"tiny-{kind}"
        result = runner.invoke(app, ["models", "tiny", kind, "--out", str(out)])
        assert result.exit_code == 0, (result.output, result.exception)
        built[kind] = (out, result.stdout)
    return built


@pytest.mark.parametrize("kind", list(LOADERS))
def test_each_kind_builds_loads_back_and_says_random_weights(
    kind: str, models: dict[str, tuple[Path, str]]
) -> None:
    out, printed = models[kind]
    lines = printed.strip().splitlines()
    assert len(lines) == 2 and all("random weights" in line for line in lines), printed
    assert lines[0].startswith("built a tiny ") and str(out) in lines[0]
    assert ("--support nli:" if kind == "nli" else "--policy hf:") + str(out) in lines[1]

    model_class, processor_class = LOADERS[kind]
    model = model_class.from_pretrained(out, local_files_only=True)
    processor = processor_class.from_pretrained(out, local_files_only=True)
    tokenizer = getattr(processor, "tokenizer", processor)
    context = 128 if kind == "nli" else 4096
    assert model.config.get_text_config().max_position_embeddings == context == tokenizer.model_max_length
    if kind == "nli":
        assert sorted(model.config.label2id) == ["contradiction", "entailment", "neutral"]
    else:
        assert "<|im_start|>assistant" in tokenizer.apply_chat_template(
            [{"role": "user", "content": "Hi"}], add_generation_prompt=True, tokenize=False
        )
    if kind == "vlm":
        assert type(processor.image_processor).__name__ == "CLIPImageProcessorPil"

    card = (out / MODEL_CARD).read_text()
    assert card.startswith("# Tiny ") and "RANDOM WEIGHTS" in card.splitlines()[0]
    assert "never trained" in card and "What it is not for: any measurement" in card
    assert f"embodia models tiny {kind}" in card
    marker = json.loads((out / BUILD_MARKER).read_text())
    assert marker["random_weights"] is True and marker["kind"] == kind and marker["context_tokens"] == context


def test_a_rerun_is_a_no_op_that_says_so(models: dict[str, tuple[Path, str]]) -> None:
    out, _ = models["chat"]
    files = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    result = runner.invoke(app, ["models", "tiny", "chat", "--out", str(out)])
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.endswith("nothing to do") and "already holds this tiny chat LM with random weights" in first
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == files


def test_context_and_seed_are_options(tmp_path: Path, models: dict[str, tuple[Path, str]]) -> None:
    out = tmp_path / "chat-512"
    result = runner.invoke(
        app, ["models", "tiny", "chat", "--out", str(out), "--context", "512", "--seed", "3"]
    )
    assert result.exit_code == 0, result.output
    assert "(seed 3, 512-token context" in result.stdout
    assert AutoConfig.from_pretrained(out, local_files_only=True).max_position_embeddings == 512
    assert AutoTokenizer.from_pretrained(out, local_files_only=True).model_max_length == 512
    other = (out / "model.safetensors").read_bytes()
    assert other != (models["chat"][0] / "model.safetensors").read_bytes()  # seed 3, not 0


def _one_error_line(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output
    return lines[0]


def test_bad_input_is_one_line_and_touches_nothing(
    tmp_path: Path, models: dict[str, tuple[Path, str]]
) -> None:
    chat, _ = models["chat"]
    assert "unknown tiny model 'llm': expected one of chat, vlm, nli" in _one_error_line(
        ["models", "tiny", "llm", "--out", str(tmp_path / "x")]
    )
    assert "--context must be in 64..131,072, got 10" in _one_error_line(
        ["models", "tiny", "chat", "--out", str(tmp_path / "x"), "--context", "10"]
    )
    assert not (tmp_path / "x").exists()
    # a finished build of another kind, or with another seed, is never overwritten
    assert f"{chat} already holds a tiny chat model built otherwise (kind chat, not vlm)" in _one_error_line(
        ["models", "tiny", "vlm", "--out", str(chat)]
    )
    assert "(seed 0, not 7)" in _one_error_line(["models", "tiny", "chat", "--out", str(chat), "--seed", "7"])
    # a folder of other files, or a file
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert "holds other files: pick a new or empty folder" in _one_error_line(
        ["models", "tiny", "chat", "--out", str(mine)]
    )
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert "is a file, not a folder" in _one_error_line(
        ["models", "tiny", "chat", "--out", str(mine / "notes.txt")]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no half-built folder anywhere


def test_the_backend_warns_and_its_name_says_random_weights(
    tmp_path: Path, models: dict[str, tuple[Path, str]], caplog: pytest.LogCaptureFixture
) -> None:
    chat, _ = models["chat"]
    with caplog.at_level(logging.WARNING, logger="embodia.policies.hf"):
        policy = HFPolicy(chat, name=f"hf:{chat}")
    warned = [r.getMessage() for r in caplog.records if r.name == "embodia.policies.hf"]
    assert warned == [
        f"{chat} holds random weights (built by `embodia models tiny chat`, seed 0): its outputs are noise, "
        "for trying embodia offline only"
    ]
    assert policy.name == f"hf:{chat} (random weights)"
    completion = policy.complete([{"role": "user", "content": "Where is the kitchen?"}], max_tokens=3)
    assert completion.model == f"hf:{chat} (random weights)"
    # The same files without the marker are any other model: no warning, no label.
    trained = tmp_path / "trained"
    shutil.copytree(chat, trained, ignore=shutil.ignore_patterns(BUILD_MARKER))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="embodia.policies.hf"):
        plain = HFPolicy(trained, name=f"hf:{trained}")
    assert plain.name == f"hf:{trained}" and plain.random_weights is None
    assert not [r for r in caplog.records if r.name == "embodia.policies.hf"]


def test_settings_that_name_a_random_weight_model_are_noted(
    tmp_path: Path, models: dict[str, tuple[Path, str]]
) -> None:
    chat, vlm, nli = (models[kind][0] for kind in ("chat", "vlm", "nli"))
    gate = tmp_path / "gate"  # a speak gate's metadata names the VLM it reads
    gate.mkdir()
    (gate / "gate.json").write_text(json.dumps({"format": 1, "model_dir": str(vlm.resolve())}))
    settings = {
        "agent": f"gate:{gate}",
        "reasoner": f"hf:{chat}?seed=3",
        "perceiver": f"vllm:{vlm}",
        "support": f"nli:{nli}",
        "judge": f"judge:hf:{chat}",
        "speaker": "openai:http://127.0.0.1:8000/v1?model=tiny-chat",
        "scene": "procedural:seed=0",
        "items": 3,
    }
    notes = random_weights_in(settings)
    assert sorted(notes) == ["agent", "judge", "perceiver", "reasoner", "support"]
    assert notes["perceiver"].startswith(f"{vlm} holds random weights (built by `embodia models tiny vlm`")


def test_a_run_with_a_tiny_model_records_random_weights(
    tmp_path: Path, models: dict[str, tuple[Path, str]]
) -> None:
    chat, _ = models["chat"]
    out = tmp_path / "runs" / "dsr"
    args = ["eval", "dsr", "--policy", f"hf:{chat}", "--limit", "1", "--tokens", "4", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    assert "(random weights)" in result.stdout  # the table's title names the policy
    run = json.loads((out / "run.json").read_text())
    assert run["policy"] == f"hf:{chat}" and "random weights" in run["random_weights"]["policy"]
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert [a["model"] for a in answers] == [f"hf:{chat} (random weights)"]
    assert json.loads((out / "report.json").read_text())["models"] == [f"hf:{chat} (random weights)"]
    # Continuing compares the settings only: the same command resumes (nothing left to ask).
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert len((out / "answers.jsonl").read_text().splitlines()) == 1

    # config.yaml (every other run kind) says it beside the settings, and resuming is unchanged.
    other = tmp_path / "runs" / "csmr"
    other.mkdir()
    settings = {"reasoner": f"hf:{chat}", "perceiver": "oracle", "items": 1}
    write_config(other, {"settings": settings})
    config = yaml.safe_load((other / "config.yaml").read_text())
    assert config["settings"] == settings and "random weights" in config["random_weights"]["reasoner"]
    assert check_resumable(other, settings, resume=True)

    listed = {run.id: run.summary for run in discover(tmp_path / "runs")}
    assert listed["dsr"]["model"] == "random weights"


def test_a_served_tiny_model_is_labelled_from_the_folder_vllm_lists(
    tmp_path: Path, models: dict[str, tuple[Path, str]]
) -> None:
    from openai.types import Model

    from embodia.policies.openai_compat import OpenAICompatPolicy

    chat, _ = models["chat"]
    trained = tmp_path / "trained"
    shutil.copytree(chat, trained, ignore=shutil.ignore_patterns(BUILD_MARKER))

    def served(root: Path | None) -> OpenAICompatPolicy:
        # What vLLM's GET /models lists: the served name, and the folder it loaded as ``root``.
        listing = [Model(id="tiny-chat", created=0, object="model", owned_by="vllm", root=str(root))]
        policy = OpenAICompatPolicy("http://127.0.0.1:9/v1", "tiny-chat")
        policy._label_random_weights(listing if root is not None else [])
        return policy

    labelled = served(chat)
    assert labelled.name == "openai:http://127.0.0.1:9/v1?model=tiny-chat (random weights)"
    assert labelled.random_weights is not None and "embodia models tiny chat" in labelled.random_weights
    for other in (served(trained), served(tmp_path / "elsewhere"), served(None)):
        assert other.random_weights is None and not other.name.endswith("(random weights)")


def test_the_chat_lm_shape_is_an_option_and_part_of_the_build(
    tmp_path: Path, models: dict[str, tuple[Path, str]]
) -> None:
    out = build_tiny_chat_lm(tmp_path / "four-heads", attention_heads=4, initializer_range=0.02)
    config = AutoConfig.from_pretrained(out, local_files_only=True)
    assert (config.num_attention_heads, config.num_key_value_heads, config.initializer_range) == (4, 2, 0.02)
    assert "4 attention heads, initial weights std 0.02" in (out / MODEL_CARD).read_text()
    assert not build_tiny("chat", out, attention_heads=4, initializer_range=0.02)  # the same build: a no-op
    # the default build records no shape, and neither shape passes for the other
    default, _ = models["chat"]
    assert "attention_heads" not in json.loads((default / BUILD_MARKER).read_text())
    with pytest.raises(EmbodiaError, match=r"attention_heads 4, not 2; initializer_range 0.02, not 0.2"):
        build_tiny("chat", out)
    with pytest.raises(EmbodiaError, match=r"attention_heads 2, not 8"):
        build_tiny("chat", default, attention_heads=8)
    for bad, message in (
        ({"attention_heads": 3}, "attention_heads must be 2, 4 or 8, got 3"),
        ({"initializer_range": 0.0}, r"initializer_range must be in \(0, 1\], got 0.0"),
    ):
        with pytest.raises(EmbodiaError, match=message):
            build_tiny("chat", tmp_path / "bad", **bad)
    with pytest.raises(EmbodiaError, match="shape the chat model, not vlm"):
        build_tiny("vlm", tmp_path / "bad", attention_heads=4)
    assert not (tmp_path / "bad").exists()


def test_the_vlm_shape_is_an_option_and_part_of_the_build(
    tmp_path: Path, models: dict[str, tuple[Path, str]]
) -> None:
    from embodia.policies.tiny_models import CAPTIONER_SHAPE, build_tiny_vlm

    out = build_tiny_vlm(tmp_path / "captioner", shape=CAPTIONER_SHAPE)
    config = AutoConfig.from_pretrained(out, local_files_only=True)
    text, vision = config.text_config, config.vision_config
    assert (text.num_hidden_layers, text.initializer_range) == (4, 0.02)
    assert (vision.num_hidden_layers, vision.hidden_size, vision.image_size) == (2, 64, 84)
    assert config.image_seq_length == 36
    assert "36 image tokens each) and a 4-layer Qwen2 decoder" in (out / MODEL_CARD).read_text()
    assert not build_tiny("vlm", out, vlm_shape=CAPTIONER_SHAPE)  # the same build: a no-op
    default, _ = models["vlm"]
    with pytest.raises(EmbodiaError, match=r"text_layers 4, not 2"):
        build_tiny("vlm", out)
    with pytest.raises(EmbodiaError, match=r"text_layers 2, not 3"):
        build_tiny("vlm", default, vlm_shape={"text_layers": 3})
    for bad, message in (
        ({"depth": 3}, "unknown VLM shape option depth"),
        ({"image_side": 50}, "multiple of 14"),
        ({"vision_hidden": 4}, r"vision_hidden must be in \[16, 512\]"),
    ):
        with pytest.raises(EmbodiaError, match=message):
            build_tiny("vlm", tmp_path / "bad", vlm_shape=bad)
    with pytest.raises(EmbodiaError, match="shapes the vlm model, not chat"):
        build_tiny("chat", tmp_path / "bad", vlm_shape={"text_layers": 3})
    assert not (tmp_path / "bad").exists()
