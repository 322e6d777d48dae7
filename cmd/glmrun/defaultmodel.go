package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// defaultModelRel is the bundled model glmrun uses when no -m is given: the
// golden glm5-mini (random weights, a real byte-level BPE vocabulary with
// GLM-5's special tokens and chat template), relative to the repository root.
const defaultModelRel = "testdata/models/glm5-mini.Q8_0.gguf"

// defaultModelPath finds the bundled model from any directory inside the
// repository: it looks for defaultModelRel in the working directory and
// each directory above it. flagName is the flag that would have named a
// file instead (-m; synth's --tokenizer), for the error's advice.
func defaultModelPath(flagName string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("no %s FILE.gguf given and the working directory is unknown: %w", flagName, err)
	}
	for dir := wd; ; {
		p := filepath.Join(dir, filepath.FromSlash(defaultModelRel))
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("no %s FILE.gguf given, and the bundled model %s is not in %s or a directory above it: pass %s with a GGUF file", flagName, defaultModelRel, wd, flagName)
}

// modelPath returns the -m value, or the bundled model if it is empty.
func modelPath(flagValue string) (string, error) {
	return modelPathFor("-m", flagValue)
}

// modelPathFor returns the value of flag flagName, or the bundled model if
// it is empty.
func modelPathFor(flagName, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return defaultModelPath(flagName)
}
