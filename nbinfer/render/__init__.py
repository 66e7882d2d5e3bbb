"""Renderers: pure functions drawing HTML / text from plain values (no I/O, no IPython).

Every layer may import this package; it imports nothing of nbinfer but itself. A class's
``_repr_*_`` names its renderer here (xarray's ``formatting_html`` is the model).
"""
