"""Evaluation harnesses for memlib's rankers (LoCoMo: ``memlib eval locomo``)."""

from __future__ import annotations

__all__ = ["crossval", "locomo"]
