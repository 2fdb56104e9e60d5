"""Simulated tensorrt_llm._torch: the PyTorch backend's registry (models/) and model_config.py."""
