"""BYTES in, BYTES out, with a preprocess hook (portable export: numpy only)."""

import numpy as np

from nbinfer import Model


class Upper(Model):
    name = "upper"
    inputs = (("INPUT0", "BYTES", [-1]),)
    outputs = (("OUTPUT0", "BYTES", [-1]),)

    def preprocess(self, inputs, context):
        return {"text": [bytes(v) for v in inputs["INPUT0"].reshape(-1)]}

    def predict(self, inputs, context):
        return {"OUTPUT0": np.array([v.upper() for v in inputs["text"]], dtype=object)}
