// Package model loads GLM-5 (glm-dsa) and DeepSeek-V2/V3 (deepseek2) MLA
// models from GGUF files and runs their forward pass; it also maps tensor
// names between GGUF and Hugging Face checkpoints.
package model
