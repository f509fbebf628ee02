"""Drawing pipeline timelines (Chapters 14 and 18): one row per rank, one box per action.

Colours: forward blue, backward orange, weight gradients green; a rank's second chunk (or second
direction) in lighter shades.  ``raster=True`` paints all boxes into one small image, so that a figure
stays a few kilobytes whatever the number of actions (for widgets that store many figures).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

from labs.parallel.pipeline.sim import Timeline, bubble_fraction

__all__ = ["draw_timeline"]

_COLORS = {"F": "#4C72B0", "B": "#DD8452", "W": "#55A868"}
_COLORS_2 = {"F": "#9BB3DA", "B": "#F0BE98", "W": "#9FD1AE"}
_LABEL_PT = 9  # font size of the micro-batch numbers in the boxes


def _rgb(hex_color: str) -> tuple[float, float, float]:
    return tuple(int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5))


def draw_timeline(
    tl: Timeline, ax=None, title: str | None = None, labels: bool = True, raster: bool = False
):
    """Draw one row per rank, one box per action: F blue, B orange, W green; a rank's second
    chunk (or second direction) in lighter shades; the micro-batch number inside the box.

    ``raster=True`` paints the boxes into one small image (no labels): a figure of a few
    kilobytes whatever the number of actions, for widgets that store many figures.
    """
    s = tl.schedule
    if ax is None:  # a 6.5-inch text column: fonts of 9 pt stay legible at print size
        _, ax = plt.subplots(figsize=(6.5, 0.4 * s.p + 1.3))
    if raster:
        res = min(e.end - e.start for evs in tl.events for e in evs) / 4
        img = np.ones((s.p, int(round(tl.makespan / res)), 3))
        for r, evs in enumerate(tl.events):
            for e in evs:
                a, b = int(round(e.start / res)), int(round(e.end / res))
                img[r, a : b - 1] = _rgb(
                    (_COLORS_2 if e.action.chunk % 2 else _COLORS)[e.action.kind]
                )
        ax.imshow(
            img, aspect="auto", interpolation="nearest", extent=(0, tl.makespan, s.p - 0.5, -0.5)
        )
    else:
        fig = ax.figure
        # points per time unit, with a margin for the tick labels that tight_layout will take
        pt_per_unit = 0.85 * ax.get_position().width * fig.get_figwidth() * 72 / tl.makespan
        for r, evs in enumerate(tl.events):
            for e in evs:
                color = (_COLORS_2 if e.action.chunk % 2 else _COLORS)[e.action.kind]
                ax.barh(
                    r,
                    e.end - e.start,
                    left=e.start,
                    height=0.8,
                    color=color,
                    edgecolor="white",
                    linewidth=0.5,
                )
                text = str(e.action.mb)
                # a digit at 9 pt is about 5 pt wide: label only the boxes the text fits in
                if (
                    labels
                    and (e.end - e.start) * pt_per_unit >= _LABEL_PT * (5 * len(text) + 2) / 9
                ):
                    ax.text(
                        (e.start + e.end) / 2,
                        r,
                        text,
                        ha="center",
                        va="center",
                        fontsize=_LABEL_PT,
                        color="black",
                    )
        ax.invert_yaxis()
    ax.set_yticks(range(s.p), [f"rank {r}" for r in range(s.p)])
    ax.tick_params(labelsize=9)
    ax.set_xlim(0, tl.makespan)
    ax.set_xlabel("time (cost units)", fontsize=9)
    frac = bubble_fraction(tl)
    # the title sits left above the legend row, so the two never overlap
    ax.set_title(
        title or f"{s.name}: p={s.p}, m={s.m}, bubble {frac:.1%}", fontsize=10, loc="left", pad=22
    )
    kinds = sorted({e.action.kind for evs in tl.events for e in evs}, key="FBW".index)
    names = {
        "F": "forward",
        "B": "backward" if "W" not in kinds else "input grad (B)",
        "W": "weight grad (W)",
    }
    ax.legend(
        handles=[Patch(color=_COLORS[k], label=names[k]) for k in kinds],
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=len(kinds),
        fontsize=9,
        frameon=False,
        borderaxespad=0.1,
        handlelength=1.2,
        columnspacing=1.0,
    )
    return ax
