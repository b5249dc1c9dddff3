"""Evaluation harnesses for memlib's rankers (LoCoMo: ``memlib eval locomo``; the
``min_score`` calibration: ``python -m benchmarks.abstention``)."""

from __future__ import annotations

__all__ = ["abstention", "locomo"]
