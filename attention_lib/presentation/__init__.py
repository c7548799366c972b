"""Presentation: what the chapters show, apart from the maths.

- :mod:`.plotting`: static figures of weights and masks (matplotlib, imported
  when a figure is drawn);
- :mod:`.charts`: interactive charts that recompute attention in the reader's
  browser, built on the Vega-Lite helpers of :mod:`.vega` and put on a page by
  :mod:`.embed` (Altair, imported when a chart is built);
- :mod:`.widgets`: the live model widgets of the book's pages;
- :mod:`.tables`: plain-text tables for printed results;
- ``glue``: numbers for the prose, with or without Jupyter Book.
"""

from ._glue import glue
from .charts import (
    attention_heatmap_chart,
    mask_explorer_chart,
    mask_explorer_scores,
    online_softmax_chart,
    saturation_chart,
    saturation_scores,
)
from .embed import chart_html, show
from .tables import format_table, print_table
from .widgets import widget_html

__all__ = [
    "attention_heatmap_chart",
    "chart_html",
    "format_table",
    "glue",
    "mask_explorer_chart",
    "mask_explorer_scores",
    "online_softmax_chart",
    "print_table",
    "saturation_chart",
    "saturation_scores",
    "show",
    "widget_html",
]
