"""BF16 in, the same BF16 out (nbinfer's server: ml_dtypes.bfloat16 arrays)."""

import numpy as np
import numpy.typing as npt

import nbinfer


@nbinfer.model(inputs=[("INPUT0", "BF16", [-1])], outputs=[("OUTPUT0", "BF16", [-1])])
def identity_bf16(INPUT0: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    return INPUT0.copy()
