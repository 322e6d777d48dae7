package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/quantref"
	"github.com/glmrun/glmrun/tensor"
)

// quantRefsPath holds llama-quantize's results on the test inputs
// (written by tools/quantref).
const quantRefsPath = "../../testdata/quantize/llamacpp-refs.json.gz"

// kQuantRMSSlack is how much larger than llama-quantize's a K-quant
// tensor's RMS error may be: the 2% that the K-quants are held to at
// least, checked apart from their bytes so that a quantizer change that
// breaks bit-identity but keeps the quality shows as such.
const kQuantRMSSlack = 1.02

var quantRefs = sync.OnceValues(func() (*quantref.Refs, error) { return quantref.ReadRefs(quantRefsPath) })

func loadQuantRefs(t *testing.T) *quantref.Refs {
	t.Helper()
	r, err := quantRefs()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func quantSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func quantParseType(t *testing.T, name string) tensor.Type {
	t.Helper()
	typ, err := tensor.ParseType(name)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

// TestQuantizeTypesMatchLlamaQuantize: for every recorded input (the tiny
// HF checkpoints converted by llama.cpp, the derived test models, and the
// full-size GLM-5 / GLM-4.7-Flash layouts) and every file type, the plan
// writes the tensors in llama-quantize's order with llama-quantize's type
// for each, fallbacks, layer-dependent upgrades and kept tensors included.
func TestQuantizeTypesMatchLlamaQuantize(t *testing.T) {
	refs := loadQuantRefs(t)
	archs := map[string]bool{}
	for _, in := range refs.Inputs {
		archs[in.Arch] = true
		ts := make([]quantTensor, len(in.Tensors))
		for i, rt := range in.Tensors {
			ts[i] = quantTensor{Name: rt.Name, Type: quantParseType(t, rt.Type), Dims: rt.Dims}
		}
		m := quantModel{arch: in.Arch, layers: in.Layers, experts: in.Experts}
		for _, typ := range quantref.Types {
			t.Run(in.Name+"/"+typ, func(t *testing.T) {
				ft, ok := parseQuantFType(typ)
				if !ok {
					t.Fatalf("no file type %s", typ)
				}
				out := in.Outputs[typ]
				if out == nil {
					t.Fatalf("no %s output recorded", typ)
				}
				plan, err := planQuant(ft, m, ts)
				if err != nil {
					t.Fatal(err)
				}
				if len(plan) != len(out.Tensors) {
					t.Fatalf("%d tensors planned, llama-quantize wrote %d", len(plan), len(out.Tensors))
				}
				bad := 0
				for i, c := range plan {
					want := out.Tensors[i]
					if c.Name != want.Name || c.To.String() != want.Type {
						if bad++; bad <= 10 {
							t.Errorf("tensor %d: %s as %s, llama-quantize wrote %s as %s", i, c.Name, c.To, want.Name, want.Type)
						}
					}
				}
				if bad > 10 {
					t.Errorf("... %d tensors differ in all", bad)
				}
			})
		}
	}
	for _, a := range quantArchs {
		if !archs[a] {
			t.Errorf("no recorded input of architecture %s", a)
		}
	}
}

// quantizeInput is a built input written to a temporary file and checked
// to be the file llama-quantize was given.
type quantizeInput struct {
	ref  *quantref.Input
	path string
	f    *gguf.File
}

func buildQuantizeInput(t *testing.T, b *quantref.Built, refs *quantref.Refs) *quantizeInput {
	t.Helper()
	var ref *quantref.Input
	for _, in := range refs.Inputs {
		if in.Name == b.Name {
			ref = in
		}
	}
	if ref == nil {
		t.Fatalf("input %s is not in %s", b.Name, quantRefsPath)
	}
	w, done, err := b.Build("../../testdata")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), b.Name+".gguf")
	err = w.WriteFile(path)
	done()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := quantSHA256(raw); got != ref.SHA256 {
		t.Fatalf("rebuilt input has sha256 %s, llama-quantize read %s: rerun tools/quantize-refs.sh", got, ref.SHA256)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &quantizeInput{ref: ref, path: path, f: f}
}

// TestQuantizeMatchesLlamaQuantize quantizes the built inputs with the
// command and compares the files with llama-quantize's: for every file
// type the whole file is byte for byte llama-quantize's. For the derived
// inputs it also compares tensor by tensor, to name what differs, and
// holds each K-quant tensor's RMS error against the input to at most 2%
// above llama-quantize's on the same tensor.
func TestQuantizeMatchesLlamaQuantize(t *testing.T) {
	refs := loadQuantRefs(t)
	for _, b := range quantref.Inputs {
		t.Run(b.Name, func(t *testing.T) {
			in := buildQuantizeInput(t, b, refs)
			for _, typ := range quantref.Types {
				t.Run(typ, func(t *testing.T) {
					ref := in.ref.Outputs[typ]
					out := filepath.Join(t.TempDir(), typ+".gguf")
					code, stdout, stderr := runCmd(t, "quantize", "-t", "2", in.path, out, typ)
					if code != 0 {
						t.Fatalf("exit %d: %s", code, stderr)
					}
					if stderr != "" {
						t.Errorf("stderr %q: progress is for terminals only", stderr)
					}
					if !strings.HasPrefix(stdout, out+": "+typ+", ") {
						t.Errorf("report %q does not start with the file and type", stdout)
					}
					raw, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					q, err := gguf.Open(out)
					if err != nil {
						t.Fatal(err)
					}
					defer q.Close()
					if got := quantSHA256(raw[:quantref.HeaderSize(q, int64(len(raw)))]); got != ref.HeaderSHA256 {
						t.Errorf("header differs from llama-quantize's")
					}
					if int64(len(raw)) != ref.Size {
						t.Errorf("file size %d, llama-quantize's %d", len(raw), ref.Size)
					}
					if quantSHA256(raw) != ref.SHA256 {
						t.Errorf("file differs from llama-quantize's")
					}
					if !b.Full {
						return
					}
					compareQuantTensors(t, in.f, q, ref)
				})
			}
		})
	}
}

// compareQuantTensors checks q's tensors against llama-quantize's record:
// the same bytes, and for the K-quants an RMS error within kQuantRMSSlack
// of ggml's.
func compareQuantTensors(t *testing.T, in, q *gguf.File, ref *quantref.Output) {
	t.Helper()
	if len(q.Tensors) != len(ref.Tensors) {
		t.Fatalf("%d tensors, llama-quantize wrote %d", len(q.Tensors), len(ref.Tensors))
	}
	type stat struct{ tensors, same int }
	per := map[tensor.Type]*stat{}
	var worst float64
	var worstName string
	for i, qt := range q.Tensors {
		rt := ref.Tensors[i]
		if qt.Name != rt.Name || qt.Type.String() != rt.Type {
			t.Fatalf("tensor %d: %s %s, llama-quantize wrote %s %s", i, qt.Name, qt.Type, rt.Name, rt.Type)
		}
		s := per[qt.Type]
		if s == nil {
			s = &stat{}
			per[qt.Type] = s
		}
		s.tensors++
		same := quantSHA256(qt.Data) == rt.SHA256
		if same {
			s.same++
		}
		if !same {
			t.Errorf("%s (%s): bytes differ from llama-quantize's", qt.Name, qt.Type)
		}
		switch qt.Type {
		case tensor.Q4_K, tensor.Q5_K, tensor.Q6_K:
			src, _ := in.Tensor(qt.Name)
			x := make([]float32, src.NumElements())
			if err := tensor.Dequantize(src.Type, src.Data, x); err != nil {
				t.Fatal(err)
			}
			rms, err := quantref.RMSError(x, qt.Type, qt.Data)
			if err != nil {
				t.Fatal(err)
			}
			ratio := rms / rt.RMS
			if rt.RMS == 0 {
				ratio = 1
				if rms != 0 {
					ratio = math.Inf(1)
				}
			}
			if ratio > worst {
				worst, worstName = ratio, qt.Name
			}
			if ratio > kQuantRMSSlack {
				t.Errorf("%s (%s): RMS error %.4g, %.2f%% above llama-quantize's %.4g", qt.Name, qt.Type, rms, 100*(ratio-1), rt.RMS)
			}
		}
	}
	types := make([]tensor.Type, 0, len(per))
	for typ := range per {
		types = append(types, typ)
	}
	slices.Sort(types)
	var parts []string
	for _, typ := range types {
		parts = append(parts, fmt.Sprintf("%s %d/%d identical", typ, per[typ].same, per[typ].tensors))
	}
	if worstName != "" {
		parts = append(parts, fmt.Sprintf("worst K-quant RMS ratio %.4f (%s)", worst, worstName))
	}
	t.Log(strings.Join(parts, ", "))
}

// TestQuantizeErrors: bad arguments and inputs that cannot be quantized
// give an error naming the argument, file or tensor, with exit status 2
// for usage errors and 1 for the rest, and write no output.
func TestQuantizeErrors(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "text.gguf")
	if err := os.WriteFile(notGGUF, []byte("not a model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nan := writeTinyQuantInput(t, dir, "nan.gguf", float32(math.NaN()))
	q8 := testModels + "glm5-mini.Q8_0.gguf"
	out := filepath.Join(dir, "out.gguf")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no arguments", nil, 2, "want IN.gguf OUT.gguf TYPE, have 0 arguments"},
		{"two arguments", []string{q8, out}, 2, "have 2 arguments"},
		{"unknown type", []string{q8, out, "Q4_0"}, 2, `TYPE "Q4_0": want one of Q8_0, Q6_K, Q5_K_M, Q4_K_M`},
		{"negative threads", []string{"-t", "-1", q8, out, "Q8_0"}, 2, "-t -1: want >= 0 threads"},
		{"bad flag", []string{"-x", q8, out, "Q8_0"}, 2, "flag provided but not defined: -x"},
		{"no output directory", []string{q8, filepath.Join(dir, "none", "out.gguf"), "Q8_0"}, 2, "directory " + filepath.Join(dir, "none") + " does not exist"},
		{"output is a directory", []string{q8, dir, "Q8_0"}, 2, "OUT " + dir + " is a directory"},
		{"output is the input", []string{q8, q8, "Q8_0"}, 2, "is the input file"},
		{"missing input", []string{filepath.Join(dir, "missing.gguf"), out, "Q8_0"}, 1, "missing.gguf: no such file or directory"},
		{"not a GGUF file", []string{notGGUF, out, "Q8_0"}, 1, notGGUF + ": offset 0x0: not a GGUF file"},
		{"other architecture", []string{"../../testdata/formats/llama-dense.real.BF16.gguf", out, "Q8_0"}, 1,
			`architecture "llama": glmrun quantize knows llama-quantize's rules for glm-dsa and deepseek2 only`},
		{"already quantized", []string{q8, out, "Q4_K_M"}, 1,
			"tensor output.weight is already quantized (Q8_0, would become Q6_K): quantize from F32, F16 or BF16, or pass --allow-requantize"},
		{"non-finite weight", []string{nan, out, "Q8_0"}, 1, "tensor blk.0.ffn_up.weight: element 37 is NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, append([]string{"quantize"}, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, c.code, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("an output file was left behind (%v)", err)
				os.Remove(out)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".out.gguf.tmp*")); len(left) > 0 {
				t.Errorf("temporary files left behind: %q", left)
			}
		})
	}
}

// writeTinyQuantInput writes a one-block dense deepseek2 model with one
// F32 matrix whose element 37 is v, and returns its path.
func writeTinyQuantInput(t *testing.T, dir, name string, v float32) string {
	t.Helper()
	w := gguf.NewWriter()
	w.SetKV("general.architecture", gguf.String("deepseek2"))
	w.SetKV("deepseek2.block_count", gguf.Uint32(1))
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i) / 64
	}
	x[37] = v
	data := make([]byte, 4*len(x))
	if err := tensor.Quantize(tensor.F32, x, data); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("blk.0.ffn_up.weight", tensor.F32, []int64{32, 2}, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// denseQ4KMPlan opens glm5-dense.Q8_0 (closed with the test) and plans
// its requantization to Q4_K_M, that file type.
func denseQ4KMPlan(t *testing.T) (*gguf.File, []quantChoice, quantFType) {
	t.Helper()
	f, err := gguf.Open(testModels + "glm5-dense.Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ft, _ := parseQuantFType("Q4_K_M")
	plan, err := planQuantFile(f, ft, true)
	if err != nil {
		t.Fatal(err)
	}
	return f, plan, ft
}

// TestQuantizePipeline: the output does not depend on the number of
// threads or on how tensors are cut into pieces (down to one row per
// piece), so the workers' pieces are written in order; and requantizing
// (--allow-requantize) runs through the same path.
func TestQuantizePipeline(t *testing.T) {
	f, plan, ft := denseQ4KMPlan(t)
	dir := t.TempDir()
	var want []byte
	for _, o := range []quantOptions{
		{threads: 1},
		{threads: 3, chunkElems: 1}, // one row per piece
		{threads: 4, chunkElems: 5000},
	} {
		path := filepath.Join(dir, "out.gguf")
		var calls int
		var last int64
		o.progress = func(done, total int64, name string) {
			if done < last || done > total {
				t.Errorf("progress %d of %d after %d", done, total, last)
			}
			calls++
			last = done
		}
		size, err := quantizeFile(f, plan, ft, path, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if size != int64(len(got)) {
			t.Errorf("threads %d, pieces of %d: size %d returned, %d written", o.threads, o.chunkElems, size, len(got))
		}
		if want == nil {
			want = got
		} else if !bytes.Equal(got, want) {
			t.Errorf("threads %d, pieces of %d: output differs from one thread's", o.threads, o.chunkElems)
		}
		if calls == 0 || last != int64(quantInputBytes(f)) {
			t.Errorf("threads %d: progress called %d times, ending at %d of %d", o.threads, calls, last, quantInputBytes(f))
		}
	}
}

func quantInputBytes(f *gguf.File) int {
	n := 0
	for _, t := range f.Tensors {
		n += len(t.Data)
	}
	return n
}

// TestQuantizeTensorLayer reads block numbers as C's sscanf("blk.%d.")
// does, which is how llama.cpp orders tensors and finds expert layers.
func TestQuantizeTensorLayer(t *testing.T) {
	cases := []struct {
		name  string
		layer int
		ok    bool
	}{
		{"blk.0.attn_q_a.weight", 0, true},
		{"blk.78.nextn.eh_proj.weight", 78, true},
		{"blk.12", 12, true},   // the trailing dot is not checked
		{"blk.+3.x", 3, true},  // %d takes a sign
		{"blk.-1.x", -1, true}, // and a minus
		{"blk. 7.x", 7, true},  // and skips spaces
		{"blk.x.weight", 0, false},
		{"output.weight", 0, false},
		{"xblk.1.weight", 0, false},
	}
	for _, c := range cases {
		l, ok := quantTensorLayer(c.name)
		if l != c.layer || ok != c.ok {
			t.Errorf("quantTensorLayer(%q) = %d, %v; want %d, %v", c.name, l, ok, c.layer, c.ok)
		}
	}
}

// TestQuantizeVerbose: -v lists each tensor with its old and new type and
// says why a type fell back; the report gives the type histogram.
func TestQuantizeVerbose(t *testing.T) {
	dir := t.TempDir()
	in := writeTinyQuantInput(t, dir, "tiny.gguf", 0.5)
	out := filepath.Join(dir, "out.gguf")
	code, stdout, stderr := runCmd(t, "quantize", in, out, "-v", "Q4_K_M")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		`\[1/1\] +blk\.0\.ffn_up\.weight +\[32, 2\] +F32 +-> Q5_0 \(for Q4_K: rows of 32\)\n`,
		regexp.QuoteMeta(out + ": Q4_K_M, 1 tensors, 256 B -> 44 B of weights"),
		`\n +Q5_0 +1 +64 +44 +100\.0%\n`,
		`\n1 tensors fell back to another type`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("output does not match %q:\n%s", want, stdout)
		}
	}
}

// TestQuantizeCanceled: a canceled context (Ctrl-C) stops the work with
// its cause and leaves neither the output nor a temporary file.
func TestQuantizeCanceled(t *testing.T) {
	f, plan, ft := denseQ4KMPlan(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.gguf")
	ctx, cancel := context.WithCancelCause(context.Background())
	// Cancel once some pieces are written, as a Ctrl-C would.
	o := quantOptions{threads: 2, chunkElems: 4096, ctx: ctx, progress: func(done, total int64, name string) {
		if done > total/4 {
			cancel(errInterrupt)
		}
	}}
	if _, err := quantizeFile(f, plan, ft, path, o); !errors.Is(err, errInterrupt) {
		t.Fatalf("err = %v, want the interrupt", err)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("files left behind: %v", left)
	}
}
