package model

import "fmt"

// MissingTensorError reports a tensor the model needs that the file lacks.
type MissingTensorError struct {
	File string // model file
	Name string // GGUF tensor name
}

func (e *MissingTensorError) Error() string {
	return fmt.Sprintf("model: %s: missing tensor %q", e.File, e.Name)
}

// TensorError reports a tensor whose shape or type does not fit the model.
type TensorError struct {
	File string // model file
	Name string // GGUF tensor name
	Msg  string
}

func (e *TensorError) Error() string {
	return fmt.Sprintf("model: %s: tensor %q: %s", e.File, e.Name, e.Msg)
}
