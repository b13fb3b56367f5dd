"""`ttfat report --html`: one self-contained page with the summary, a waterfall of stages per turn and
the CDFs of TTFAT and first useful audio heard (failed turns sit at the right edge, as never)."""

from __future__ import annotations

import base64
import html
import io

from voice.report import INF, metric_values, text_report

# Waterfall segments: (from anchor, to anchor, label), all in ms from t0.
SEGMENTS = [
    (None, "endpoint_ms", "endpoint"),
    ("endpoint_ms", "asr_ms", "ASR"),
    ("asr_ms", "ttfat_ms", "LLM to first answer token"),
    ("ttfat_ms", "first_useful_token_ms", "to first useful token"),
    ("first_useful_token_ms", "first_useful_audio_ms", "TTS + playback start"),
    ("first_useful_audio_ms", "complete_ms", "answer playing"),
]


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
        for k, (start, end, label) in enumerate(SEGMENTS):
            a, b = (t.get(start) if start else 0.0), t.get(end)
            if a is not None and b is not None:
                ax.barh(row, b - a, left=a, color=colors[k], label=label if row == 0 else None)
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
    for key, label in [("ttfat_ms", "TTFAT"), ("first_useful_audio_ms", "first useful audio heard")]:
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
