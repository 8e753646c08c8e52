"""The report's figures: accuracy and zero-variance share against cumulative generated rollouts, per run or per
configuration of seeds. Drawn on matplotlib's Agg canvas (no pyplot state, no display); matplotlib is imported only
when a figure is drawn (the ``report`` extra)."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from recipe.pc.metric_names import CUMULATIVE_SAMPLED as ROLLOUTS
from recipe.pc.metric_names import ZERO_VARIANCE_GROUP_FRAC as ZERO_VAR

logger = logging.getLogger(__name__)

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
_LINESTYLES = ("-", "--", "-.", ":")


def _style(i: int) -> dict:
    """Run i's line style. Each later line is thinner with a smaller marker, and every line has its own
    marker and dash, so lines lying on top of each other (e.g. two runs at 0) all stay visible."""
    return {
        "marker": _MARKERS[i % len(_MARKERS)],
        "linestyle": _LINESTYLES[i % len(_LINESTYLES)],
        "linewidth": max(3.0 - 0.6 * i, 1.0),
        "markersize": max(8.0 - 1.5 * i, 3.0),
        "alpha": 0.85,
    }


def _figure(panels: int):
    # Figure + the Agg canvas directly: no pyplot global state, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6 * panels, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, panels, squeeze=False)[0]


def _rollouts_axis(ax) -> None:
    from matplotlib.ticker import EngFormatter

    ax.xaxis.set_major_formatter(EngFormatter())
    ax.grid(alpha=0.3)


def plot(frames: dict[str, pd.DataFrame], curves: dict[str, pd.DataFrame], target: float, path: Path, ylabel: str):
    """Smoothed accuracy and zero-variance group share, both against cumulative generated rollouts.

    Writes ``path`` and returns the matplotlib Figure."""
    fig, (acc_ax, zv_ax) = _figure(2)
    for i, (label, curve) in enumerate(curves.items()):
        style = _style(i)
        (line,) = acc_ax.plot(curve["rollouts"], curve["smoothed"], label=label, zorder=2 + i, **style)
        frame = frames[label]
        if ZERO_VAR in frame.columns:
            points = frame[[ROLLOUTS, ZERO_VAR]].dropna()
            # Markers at every 8th point or so: a long run's marks would otherwise merge into a thick band.
            every = max(len(points) // 12, 1)
            zv_ax.plot(
                points[ROLLOUTS],
                points[ZERO_VAR],
                color=line.get_color(),
                label=label,
                zorder=2 + i,
                markevery=every,
                **style,
            )
        else:
            logger.warning("run %s: no %s logged; left out of the second panel", label, ZERO_VAR)
    acc_ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.4f}")
    acc_ax.set(title="Validation accuracy", xlabel="cumulative generated rollouts", ylabel=ylabel)
    zv_ax.set(
        title="Zero-variance groups in the trained batch",
        xlabel="cumulative generated rollouts",
        ylabel="share of trained groups with equal rewards",
        ylim=(-0.03, 1.03),  # a margin, so a run lying on 0 or 1 is not drawn over the frame
    )
    for ax in (acc_ax, zv_ax):
        _rollouts_axis(ax)
    acc_ax.legend()
    if zv_ax.has_data():
        zv_ax.legend()
    else:
        zv_ax.text(0.5, 0.5, f"{ZERO_VAR} not logged", ha="center", transform=zv_ax.transAxes)
    fig.savefig(path, dpi=150)
    return fig


def plot_seeds(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    means: dict[str, pd.DataFrame],
    target: float,
    path: Path,
    ylabel: str,
):
    """Per configuration: each seed's smoothed accuracy as a thin line, its mean curve (``means``: the seeds table's,
    ``interpolated_mean_curve``) as a thick one, and where ``means`` has ``low`` and ``high`` columns (``mean_band``)
    the interval of the mean as a shaded band.

    Writes ``path`` and returns the matplotlib Figure."""
    fig, (ax,) = _figure(1)
    banded = False
    for i, (config, labels) in enumerate(groups.items()):
        style = _style(i)
        mean = means[config]
        (line,) = ax.plot(
            mean["rollouts"], mean["smoothed"], label=f"{config} (mean of {len(labels)})", zorder=3 + i, **style
        )
        if "low" in mean and mean["low"].notna().any():
            band = ax.fill_between(mean["rollouts"], mean["low"], mean["high"], color=line.get_color(), alpha=0.15)
            band.set(linewidth=0, zorder=1, label=f"{config}: 95% interval of the mean")
            banded = True
        for label in labels:
            curve = curves[label]
            ax.plot(
                curve["rollouts"],
                curve["smoothed"],
                color=line.get_color(),
                linestyle=style["linestyle"],
                linewidth=0.8,
                alpha=0.4,
                zorder=2,
            )
    ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.4f}")
    title = "Validation accuracy: seeds (thin), mean (thick)" + (", 95% interval" if banded else "")
    ax.set(title=title, xlabel="cumulative generated rollouts")
    ax.set(ylabel=ylabel)
    _rollouts_axis(ax)
    ax.legend(fontsize="small")
    fig.savefig(path, dpi=150)
    return fig
