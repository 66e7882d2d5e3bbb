"""A user's nbinfer.Model in a repository file (portable export: numpy only)."""

import numpy as np

import nbinfer


class TimesTwo(nbinfer.Model):
    name = "times_two"
    inputs = (("INPUT0", "INT64", [-1]),)
    outputs = (("OUTPUT0", "INT64", [-1]),)

    def predict(self, inputs, context):
        return {"OUTPUT0": inputs["INPUT0"] * np.int64(2)}
