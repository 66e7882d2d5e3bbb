"""Adapters between nbinfer's protocol types and the data science stack (pandas, Pillow).

Layer: interop (imports ``nbinfer.errors`` and ``protocol`` only, plus pandas / Pillow); never the
client, transports, session or server.
"""
