"""Exporters: the text encoder (ONNX, int8 weight-only); later bundles and personalized models."""
