"""Training curves as a PNG: one panel per metric of a run's ``metrics.jsonl`` rows, by step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def plot_curves(
    rows: Sequence[Mapping[str, Any]], path: Path, keys: Sequence[str], *, title: str = ""
) -> Path | None:
    """Draw each of ``keys`` that some row holds as a number against the rows' ``step`` into
    ``path``; None (and no file) when no row holds any of them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {
        key: [(row["step"], row[key]) for row in rows if _number(row.get(key)) and _number(row.get("step"))]
        for key in keys
    }
    series = {key: points for key, points in series.items() if points}
    if not series:
        return None
    figure, axes = plt.subplots(1, len(series), figsize=(3.2 * len(series), 2.8), squeeze=False)
    for axis, (key, points) in zip(axes[0], series.items(), strict=True):
        steps, values = zip(*points, strict=True)
        axis.plot(steps, values, marker="o" if len(points) < 30 else None, markersize=3)
        axis.set_title(key, fontsize=9)
        axis.set_xlabel("step", fontsize=8)
        axis.tick_params(labelsize=7)
        axis.grid(alpha=0.3)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value
