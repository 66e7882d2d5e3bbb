"""Adapters between nbinfer's protocol types and the data science stack (pandas, Pillow)."""
