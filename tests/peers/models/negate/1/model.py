"""An @nbinfer.model function in a repository file (portable export: numpy only)."""

import numpy as np
import numpy.typing as npt

import nbinfer


@nbinfer.model(inputs=[("x", "FP32", [-1])], outputs=[("y", "FP32", [-1])])
def negate(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return -x
