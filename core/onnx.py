"""``torch.onnx`` importable, every use refused: hookgrad models cannot be exported to ONNX."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["export"]


def export(*_: Any, **__: Any) -> NoReturn:
    raise NotImplementedError(
        "hookgrad cannot export to ONNX: build the model with torch to use torch.onnx.export"
    )
