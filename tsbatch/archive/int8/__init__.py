"""int8: quantized models compiled to AOTInductor packages, gated like bf16 (issue 19)."""
