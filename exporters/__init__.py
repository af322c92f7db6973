"""Exporters (``thor_sdk.exporters``): training steps as ONNX, TorchScript or Core ML files, and probe bundles."""
