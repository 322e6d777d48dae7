// Package backend describes what glmrun's compute backends work on: weight
// matrices kept in their GGUF storage type. The CPU kernels live in
// backend/cpu; a GPU backend and the interface both implement come later
// (see DEVELOPERS.md), so the types here stay free of kernel details.
package backend
