// Command quantref records llama-quantize's results on the test inputs of
// "glmrun quantize" in testdata/quantize/llamacpp-refs.json.gz: for every
// input and file type, the output's tensor order and types, hashes of the
// output, its header and each tensor, and each converted tensor's RMS
// error against the input (computed with glmrun's dequantizer, the same
// measure the tests apply to glmrun's output).
//
// The inputs are those of internal/quantref (built from testdata) plus any
// GGUF files named on the command line, recorded by type choice only (for
// example bf16 files made from testdata/hf by llama.cpp's converter; see
// tools/quantize-refs.sh). llama-quantize runs without an importance
// matrix, with 2 threads, in the work directory:
//
//	go run ./tools/quantref -work /var/tmp/quantref \
//	    -llama-quantize 'sh sid-chroot.sh run llama-quantize' [extra.gguf ...]
//
// The command prefix is run with the work directory as its current
// directory and file names relative to it, so that a wrapper that mounts
// the current directory (as a chroot script does) sees the files.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/quantref"
	"github.com/glmrun/glmrun/tensor"
)

func main() {
	work := flag.String("work", "", "scratch `directory` for the inputs and llama-quantize's outputs (required)")
	lq := flag.String("llama-quantize", "llama-quantize", "`command` prefix that runs llama-quantize")
	testdata := flag.String("testdata", "testdata", "the repository's testdata `directory`")
	out := flag.String("o", "testdata/quantize/llamacpp-refs.json.gz", "reference `file` to write")
	flag.Parse()
	if *work == "" {
		fmt.Fprintln(os.Stderr, "quantref: -work is required")
		os.Exit(2)
	}
	if err := run(*work, strings.Fields(*lq), *testdata, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "quantref:", err)
		os.Exit(1)
	}
}

// input is one file to quantize.
type input struct {
	name, source, file string
	full               bool // record tensor hashes and errors
	built              bool // record the input's hash
}

func run(work string, lq []string, testdata, out string, extra []string) error {
	if len(lq) == 0 {
		return fmt.Errorf("-llama-quantize is empty")
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	var inputs []input
	for _, b := range quantref.Inputs {
		w, done, err := b.Build(testdata)
		if err != nil {
			return fmt.Errorf("%s: %w", b.Name, err)
		}
		file := b.Name + ".gguf"
		err = w.WriteFile(filepath.Join(work, file))
		done()
		if err != nil {
			return err
		}
		inputs = append(inputs, input{name: b.Name, source: b.Source, file: file, full: b.Full, built: true})
	}
	for _, path := range extra {
		file := filepath.Base(path)
		if err := copyFile(path, filepath.Join(work, file)); err != nil {
			return err
		}
		name := strings.TrimSuffix(file, ".gguf")
		inputs = append(inputs, input{name: name, source: file + ", made by llama.cpp's converter", file: file})
	}
	refs := &quantref.Refs{Note: "llama-quantize IN OUT TYPE 2, no importance matrix; rms: root-mean-square error of the output tensor against the input, dequantized by glmrun"}
	for _, in := range inputs {
		ref, version, err := record(work, lq, in)
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		refs.LlamaQuantize = version
		refs.Inputs = append(refs.Inputs, ref)
		fmt.Fprintf(os.Stderr, "%s: %d tensors\n", in.name, len(ref.Tensors))
	}
	return quantref.WriteRefs(out, refs)
}

// record quantizes one input to every type and describes the results.
func record(work string, lq []string, in input) (*quantref.Input, string, error) {
	path := filepath.Join(work, in.file)
	f, err := gguf.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	arch := f.Architecture()
	ref := &quantref.Input{Name: in.name, Source: in.source, Arch: arch, Outputs: map[string]*quantref.Output{}}
	if n, err := f.Uint(arch + ".block_count"); err == nil {
		ref.Layers = int(n)
	}
	if n, err := f.Uint(arch + ".expert_count"); err == nil {
		ref.Experts = int(n)
	}
	if in.built {
		if ref.SHA256, err = fileSHA256(path); err != nil {
			return nil, "", err
		}
	}
	for _, t := range f.Tensors {
		ref.Tensors = append(ref.Tensors, &quantref.Tensor{Name: t.Name, Type: t.Type.String(), Dims: t.Dims})
	}
	var version string
	for _, typ := range quantref.Types {
		outFile := in.name + "." + typ + ".gguf"
		cmd := exec.Command(lq[0], append(lq[1:], in.file, outFile, typ, "2")...)
		cmd.Dir = work
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Run(); err != nil {
			return nil, "", fmt.Errorf("llama-quantize %s: %v\n%s", typ, err, log.String())
		}
		for line := range strings.SplitSeq(log.String(), "\n") {
			if strings.HasPrefix(line, "version:") {
				version = strings.TrimSpace(line)
			}
		}
		o, err := describe(f, filepath.Join(work, outFile), in.full)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", outFile, err)
		}
		ref.Outputs[typ] = o
	}
	return ref, version, nil
}

// describe hashes an output file and, for full inputs, its tensors, and
// measures each converted tensor's error against the input.
func describe(in *gguf.File, path string, full bool) (*quantref.Output, error) {
	q, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	header := quantref.HeaderSize(q, int64(len(raw)))
	o := &quantref.Output{SHA256: hexSum(raw), HeaderSHA256: hexSum(raw[:header]), Size: int64(len(raw))}
	for _, t := range q.Tensors {
		ot := &quantref.OutTensor{Name: t.Name, Type: t.Type.String()}
		o.Tensors = append(o.Tensors, ot)
		if !full {
			continue
		}
		ot.SHA256 = hexSum(t.Data)
		src, ok := in.Tensor(t.Name)
		if !ok {
			return nil, fmt.Errorf("tensor %s is not in the input", t.Name)
		}
		if src.Type == t.Type {
			continue
		}
		x := make([]float32, src.NumElements())
		if err := tensor.Dequantize(src.Type, src.Data, x); err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if ot.RMS, err = quantref.RMSError(x, t.Type, t.Data); err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
	}
	return o, nil
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return hexSum(b), nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
