"""The quantization formats ModelConfig.load_hf_quant_config reads from config.json's quantization_config, in
the shape of tensorrt_llm/_torch/model_config.py (main as read for docs/trtllm.md); ModelOpt checkpoints are
read from their hf_quant_config.json."""

from __future__ import annotations

HF_QUANT_CONFIG = "hf_quant_config.json"


class ModelConfig:
    @staticmethod
    def load_hf_quant_config(hf_quant_config: dict) -> str | None:
        if hf_quant_config.get("quant_method") == "fp8" and hf_quant_config.get("weight_block_size"):
            return "FP8_BLOCK_SCALES"
        elif hf_quant_config.get("quant_method") == "mxfp4":
            return "W4A16_MXFP4"
        elif hf_quant_config.get("quant_method") == "compressed-tensors":
            return "COMPRESSED_TENSORS"
        elif hf_quant_config.get("quant_method") == "nvfp4":
            return "NVFP4"
        return None
