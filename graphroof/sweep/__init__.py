"""Sweeps of any model over the batch on several devices (:func:`batch_sweep`); the LLM sweep over batch,
prompt, gen, dtypes and TP is :func:`graphroof.llm.sweep.sweep`."""

from .batch import BatchPoint, BatchSweep, batch_sweep

__all__ = ["BatchPoint", "BatchSweep", "batch_sweep"]
