package convert

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/safetensors"
	"github.com/glmrun/glmrun/tensor"
)

// Options control a conversion.
type Options struct {
	// OutType is the type of the weight matrices: OutF32, OutF16,
	// OutBF16, OutQ8_0, or OutAuto / "" (bf16 or f16 after the first
	// matrix stored as one of them, else f16, as llama.cpp's "auto").
	// Vectors, norms and the router stay F32 whatever it is.
	OutType string
	// NoMTP drops the NextN (multi-token prediction) blocks that GLM
	// checkpoints append after their trunk layers.
	NoMTP bool
	// Progress, when set, is called as tensor data is written with the
	// bytes written so far and the total.
	Progress func(done, total int64)
}

// Result describes the file Convert wrote.
type Result struct {
	Path     string
	Arch     string // GGUF architecture: glm-dsa or deepseek2
	HFArch   string // config.json's architecture class
	Name     string // general.name
	OutType  string // the resolved output type
	FileType uint32 // general.file_type
	Blocks   int    // block_count
	NextN    int    // NextN blocks kept
	Tensors  int
	// TypeCounts counts the tensors of each ggml type.
	TypeCounts map[tensor.Type]int
	Params     int64 // parameters (elements) written
	DataBytes  int64 // tensor data bytes
	FileBytes  int64
}

var outTypes = map[string]tensor.Type{OutF32: tensor.F32, OutF16: tensor.F16, OutBF16: tensor.BF16, OutQ8_0: tensor.Q8_0}

// Convert converts the Hugging Face checkpoint in dir to a GGUF file at
// out. The file is written under a temporary name in out's directory and
// renamed when complete, so a failed conversion leaves nothing behind.
func Convert(dir, out string, opts Options) (*Result, error) {
	h, hfArch, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	s, err := readSpec(h, hfArch, opts.NoMTP)
	if err != nil {
		return nil, err
	}
	outType := strings.ToLower(opts.OutType)
	if outType == "" {
		outType = OutAuto
	}
	if _, ok := outTypes[outType]; !ok && outType != OutAuto {
		return nil, fmt.Errorf("convert: output type %q: want f32, f16, bf16, q8_0 or auto", opts.OutType)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	if outType == OutAuto {
		outType = guessOutType(ck, s)
	}
	plan, err := buildPlan(ck, s, outTypes[outType])
	if err != nil {
		return nil, err
	}
	voc, err := readVocab(dir, h, s)
	if err != nil {
		return nil, err
	}
	gen, err := readJSON(filepath.Join(dir, "generation_config.json"), true)
	if err != nil {
		return nil, err
	}

	res := &Result{Path: out, Arch: s.arch, HFArch: hfArch, OutType: outType, FileType: fileTypes[outType],
		Blocks: s.blocks, Tensors: len(plan), TypeCounts: map[tensor.Type]int{}}
	if s.keepMTP {
		res.NextN = s.nextn
	}
	var shared, expert, expertSum, expertTensors int64
	for _, o := range plan {
		n := o.numElements()
		res.Params += n
		res.DataBytes += o.size()
		res.TypeCounts[o.typ]++
		if strings.Contains(o.name, "_exps.") && len(o.ne) >= 3 {
			expert += n / o.ne[2]
			expertSum += o.ne[2]
			expertTensors++
		} else {
			shared += n
		}
	}

	// Metadata, in llama.cpp's order.
	w := gguf.NewWriter()
	m := &metaWriter{w: w, arch: s.arch}
	m.set("general.architecture", gguf.String(s.arch))
	m.set("general.type", gguf.String("model"))
	if gen != nil {
		if err := writeSampling(m, &hparams{path: filepath.Join(dir, "generation_config.json"), m: gen}); err != nil {
			return nil, err
		}
	}
	var mn modelName
	if nop, ok := h.raw["_name_or_path"].(string); ok && strings.Count(nop, "/") <= 1 {
		mn.from(nop, res.Params)
	}
	mn.from(dirID(dir), res.Params)
	if mn.sizeLabel == "" && res.Params > 0 {
		count := int64(0)
		if expertTensors > 0 {
			count = expertSum / expertTensors
		}
		mn.sizeLabel = sizeLabel(res.Params, shared, expert, count)
	}
	res.Name = mn.name
	m.set("general.name", gguf.String(mn.name))
	for _, kv := range []struct{ key, v string }{
		{"general.version", mn.version}, {"general.organization", mn.org}, {"general.finetune", mn.finetune},
		{"general.basename", mn.basename}, {"general.size_label", mn.sizeLabel},
	} {
		if kv.v != "" {
			m.set(kv.key, gguf.String(kv.v))
		}
	}
	if err := writeModelParams(m, h, s, res.FileType); err != nil {
		return nil, err
	}
	m.set("general.quantization_version", gguf.Uint32(2))
	voc.write(m)

	// Tensors, streamed.
	var done int64
	st := newStreamer(s.fp8Block, ck, func(n int64) {
		done += n
		if opts.Progress != nil {
			opts.Progress(done, res.DataBytes)
		}
	})
	stream := make([]gguf.StreamTensor, len(plan))
	for i, o := range plan {
		stream[i] = gguf.StreamTensor{Name: o.name, Type: o.typ, Dims: o.ne,
			Write: func(out io.Writer) error { return st.write(out, o) }}
	}
	if res.FileBytes, err = writeAtomic(out, func(f io.Writer) (int64, error) { return w.WriteStream(f, stream) }); err != nil {
		return nil, err
	}
	return res, nil
}

// guessOutType is llama.cpp's "auto": the type of the first matrix stored
// as BF16 or F16, else f16.
func guessOutType(ck *safetensors.Checkpoint, s *spec) string {
	for _, t := range ck.Tensors {
		if len(t.Shape) < 2 || multimodalSkip(t.Name) {
			continue
		}
		if l := layerOf(t.Name); l >= s.layers && !s.keepMTP {
			continue
		}
		switch t.DType {
		case safetensors.BF16:
			return OutBF16
		case safetensors.F16:
			return OutF16
		}
	}
	return OutF16
}

// writeAtomic writes a file through write into a temporary file next to
// path and renames it to path once complete.
func writeAtomic(path string, write func(io.Writer) (int64, error)) (n int64, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, fmt.Errorf("convert: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if n, err = write(tmp); err != nil {
		return 0, fmt.Errorf("convert: %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return 0, fmt.Errorf("convert: %w", err)
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, fmt.Errorf("convert: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("convert: %w", err)
	}
	return n, nil
}
