"""Running a network over many images: a bounded batch at a time (the model, adapt and few-shot share it).

>>> run_in_batches(model.network, images, model.preprocessing).shape     # doctest: +SKIP
(300, 6)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sdk.engines.network import Network, SplitNetwork
    from sdk.media.preprocessing import Preprocessing
    from sdk.prototypes import CosineNetwork

PREDICT_BATCH = 64


def run_in_batches(network: Network | SplitNetwork | CosineNetwork, images: np.ndarray, preprocessing: Preprocessing
                   ) -> np.ndarray:
    """network.run over uint8 images [N, S, S, 3], normalized and run PREDICT_BATCH at a time (bounds the
    float32 copy and the activations)."""
    return np.concatenate([network.run(preprocessing.normalize(images[i:i + PREDICT_BATCH]))
                           for i in range(0, len(images), PREDICT_BATCH)])
