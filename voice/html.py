"""`ttfat report --html`: one self-contained page with the summary, a waterfall of stages per turn and
the CDFs of TTFAT and first useful audio heard (failed turns sit at the right edge, as never)."""

from __future__ import annotations

import base64
import html
import io

from voice.anchors import BY_NAME, HEADLINE, STAGES
from voice.report import INF, metric_values, text_report


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def waterfall(turns: list[dict]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 0.25 * len(turns) + 1.5))
    colors = plt.get_cmap("tab10").colors
    for row, t in enumerate(turns):
        for k, stage in enumerate(STAGES):
            a = t.get(BY_NAME[stage.start].metric) if stage.start else 0.0
            b = t.get(BY_NAME[stage.end].metric)
            if a is not None and b is not None:
                ax.barh(row, b - a, left=a, color=colors[k], label=stage.label if row == 0 else None)
        if t["status"] != "ok":
            ax.text(0, row, f"  {t['status']}", va="center", fontsize=7, color="red")
    ax.set_yticks(range(len(turns)), [f"{t['call']}:{t['turn']}" for t in turns], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("ms from t0 (end of the caller's speech)")
    ax.legend(fontsize=7, loc="lower right")
    return fig


def cdfs(turns: list[dict]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    labels = {a.metric: a.label for a in BY_NAME.values()}
    for key, label in ((k, labels[k]) for k in HEADLINE):
        values = sorted(metric_values(turns, key))
        finite = [v for v in values if v != INF]
        if values:
            ax.step(finite, [(i + 1) / len(values) for i in range(len(finite))], where="post", label=label)
    ax.set_xlabel("ms from t0")
    ax.set_ylabel("fraction of turns (failures never arrive)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def html_report(turns: list[dict], summary: dict) -> str:
    import matplotlib.pyplot as plt

    figures = [waterfall(turns), cdfs(turns)]
    images = "".join(f'<img src="data:image/png;base64,{_png(f)}">' for f in figures)
    for f in figures:
        plt.close(f)
    return (
        "<!doctype html><meta charset='utf-8'><title>ttfat report</title>"
        "<style>body{font-family:sans-serif;margin:2em}pre{background:#f4f4f4;padding:1em}</style>"
        f"<h1>ttfat report</h1><pre>{html.escape(text_report(summary))}</pre>"
        f"<h2>Stages per turn, and CDFs</h2>{images}"
    )
