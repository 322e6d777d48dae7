// Package convert turns a Hugging Face checkpoint directory (config.json,
// safetensors weights, tokenizer.json) of GLM-5 / GLM-5.1 / GLM-5.2
// (GlmMoeDsaForCausalLM, GGUF arch glm-dsa), GLM-4.7-Flash
// (Glm4MoeLiteForCausalLM) or DeepSeek-V3 (DeepseekV3ForCausalLM, both
// deepseek2) into a GGUF file.
//
// The output is meant to be the file llama.cpp's convert_hf_to_gguf.py
// writes for the same checkpoint and output type: the same metadata keys,
// values, types and order, the same tensors in the same order with the
// same bytes (docs/FILE-LAYOUTS.md section 7 lists the rules and the few
// deliberate differences). It streams: each output tensor is produced
// piece by piece while the file is written, so memory holds a few chunks,
// not the model.
package convert
