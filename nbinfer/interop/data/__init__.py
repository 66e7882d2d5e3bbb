"""Data files of nbinfer.interop.samples (iris.csv, digits.npz)."""
