"""The arithmetic of personalization: ResNet-18 as data, the bases, the mixer, batch-norm folding, and the fusion of
weights (numpy and the C kernel). Imports `sdk.media` only.

- `architecture`: the network's tensors, shapes and mixer blocks;
- `bases`: the bases as stored, layer by layer, and their reference mix;
- `mixer`: the mixer predictor's tensors and forward;
- `folding`: batch norm folded into the convs;
- `plan`: fusion and folding in one pass into a route's buffer;
- `native`: the C fusion kernel (`_fusion_kernel.c`) and its loader;
- `quantize`: the 7-bit int8 weight quantizer.
"""

__all__ = ["architecture", "bases", "mixer", "folding", "plan", "native", "quantize"]
