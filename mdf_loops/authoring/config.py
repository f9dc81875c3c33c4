"""Settings of the authoring layer, named as PyTensor's ``config``.

``config.floatX`` is the element type of the float constructors that take no
dtype (``vector``, ``matrix``, ``scalar``, ``tensor3``, ``tensor``): ``"float64"``
(PyTensor's default) or ``"float32"``/``"float16"``::

    from mdf_loops.authoring import config
    config.floatX = "float32"
"""

from __future__ import annotations

from mdf_loops.authoring.errors import AuthoringError

__all__ = ["config", "Config"]

_FLOAT_TYPES = ("float64", "float32", "float16")


class Config:
    """Settings read when a symbol is made (not when a model runs)."""

    def __init__(self) -> None:
        self._floatX = "float64"

    @property
    def floatX(self) -> str:  # noqa: N802  (PyTensor's name)
        return self._floatX

    @floatX.setter
    def floatX(self, value: str) -> None:  # noqa: N802
        if value not in _FLOAT_TYPES:
            raise AuthoringError(f"config.floatX must be one of {_FLOAT_TYPES}, not {value!r}")
        self._floatX = value


#: the settings (one per process, as PyTensor's)
config = Config()
