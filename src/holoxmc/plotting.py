"""Matplotlib, an optional extra: imported only when a figure is drawn.

``pip install holoxmc[plot]`` installs it (the ``test`` extra includes it). Without it,
everything but the figures works; asking for a figure raises one :class:`InputError`.
"""

from __future__ import annotations

from typing import Any

from holoxmc.errors import InputError

__all__ = ["PLOT_EXTRA", "figure_class", "require_matplotlib"]

#: The command that installs what drawing figures needs.
PLOT_EXTRA = "pip install holoxmc[plot]"


def figure_class() -> Any:
    """``matplotlib.figure.Figure``, imported now.

    Returns:
        The class (figures drawn with it need no GUI backend).

    Raises:
        InputError: matplotlib is not installed.

    Example:
        >>> figure = figure_class()(figsize=(2, 2))
        >>> len(figure.subplots().lines)
        0
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise InputError(f"drawing figures needs matplotlib, which is not installed: {PLOT_EXTRA}") from exc
    return Figure


def require_matplotlib() -> None:
    """Check, before a long run that ends in figures, that they can be drawn.

    Raises:
        InputError: matplotlib is not installed.

    Example:
        >>> require_matplotlib()
    """
    figure_class()
