// Package dump writes, reads and compares hidden-state dumps: the named
// intermediate activations of a forward pass (embeddings, the residual
// stream after each layer, attention and FFN outputs, the final norm).
//
// A glmrun dump is a directory holding one float32 .npy file per tensor and
// an index.json listing them in forward order:
//
//	{"model": "m.gguf", "tokens": [1, 2, 3],
//	 "tensors": [{"name": "blk.0.out", "layer": 0, "shape": [3, 256], "file": "blk.0.out.npy"}, ...]}
//
// Writer produces it; its Hook method has the signature of model.Hook, so a
// forward pass dumps straight into a directory. Open reads that layout and
// also llama.cpp's (index.json plus raw little-endian f32/i32 files in ggml
// order, names such as "l_out-3"), renaming llama.cpp's tensors to glmrun's
// ("l_out-3" becomes "blk.3.out"), so the two can be compared directly.
// Compare matches two dumps tensor by tensor and names the first tensor that
// diverges: the place to look when a model loads fine but outputs garbage.
//
// The package does no logging and never trusts sizes from an index: every
// shape is checked against the length of its file before anything is read.
package dump
