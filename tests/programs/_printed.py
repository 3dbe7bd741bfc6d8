"""What the programs converted from tutorial scripts share: their ``print`` output, recorded,
and a stand-in for their matplotlib plots (:func:`recording_plot`).

A script converted to ``main(torch)`` prints its results instead of returning them. Its
``print`` becomes :func:`recording_print`'s: each line is kept with its numbers masked (the
text compared exactly) followed by the numbers themselves (compared to the harness's
tolerance), and ``grad_fn=<...>`` names are masked (an LSTM prints torch's
``MkldnnRnnLayerBackward0`` where hookgrad has ``StackBackward0``; the numbers are the same).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_NUMBER = re.compile(r"-?\d+\.?\d*(?:e-?\d+)?")
_GRAD_FN = re.compile(r"grad_fn=<\w+>")


def recording_print(record: list[object]) -> Callable[..., None]:
    """A ``print`` that appends each line's masked text and then its numbers to ``record``."""

    def print(*args: object, **kwargs: object) -> None:
        line = _GRAD_FN.sub("grad_fn=<...>", " ".join(str(a) for a in args))
        record.append(_NUMBER.sub("#", line))
        record.extend(float(x) for x in _NUMBER.findall(line))

    return print


def recording_plot(record: list[object]) -> object:
    """A stand-in for ``matplotlib.pyplot``: any call does nothing but append the sum of each
    float array it is given to ``record`` (what the script plotted, compared as numbers);
    ``subplots(rows, cols)`` gives a figure and an axes array of stand-ins, as pyplot does."""
    import numpy as np

    class Plot:
        def __getattr__(self, name: str) -> Callable[..., object]:
            def call(*args: object, **kwargs: object) -> object:
                if name == "subplots":
                    rows, cols = (*args, 1, 1)[:2]
                    axs = np.empty((rows, cols), dtype=object)
                    for index in np.ndindex(axs.shape):
                        axs[index] = Plot()
                    return Plot(), (axs[0, 0] if axs.size == 1 else axs)
                for a in args:
                    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
                        record.append(float(a.sum()))
                return Plot()

            return call

    return Plot()
