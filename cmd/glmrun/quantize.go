package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/mmap"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/tensor"
)

const quantizeUsage = `usage: glmrun quantize [flags] IN.gguf OUT.gguf TYPE

Quantizes a glm-dsa (GLM-5) or deepseek2 (GLM-4.7-Flash, DeepSeek) model
from F32, F16 or BF16 to TYPE, one of Q8_0, Q6_K, Q5_K_M or Q4_K_M, with
llama-quantize's per-tensor types (Q6_K output, more bits for ffn_down in
the layers llama.cpp picks, norms and router kept, fallbacks for rows that
do not fit 256-element blocks), metadata and quantizers: the file is the
one llama-quantize writes without an importance matrix, byte for byte. It
works tensor by tensor in pieces, with several threads, so memory stays
small whatever the model's size. docs/FILE-LAYOUTS.md lists the rules.

flags:
`

// runQuantize is "glmrun quantize".
func runQuantize(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("quantize", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, quantizeUsage); fs.PrintDefaults() }
	threads := fs.Int("t", 0, "worker `threads` (0: one per CPU)")
	requant := fs.Bool("allow-requantize", false, "also convert tensors that are already quantized (dequantized first, losing what the first quantization lost)")
	verbose := fs.Bool("v", false, "list every tensor with its old and new type")
	pos, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return fmt.Errorf("%w: want IN.gguf OUT.gguf TYPE, have %d arguments", errUsage, len(pos))
	}
	inPath, outPath, typeName := pos[0], pos[1], pos[2]
	ft, ok := parseQuantFType(typeName)
	if !ok {
		names := make([]string, len(quantFTypes))
		for i, f := range quantFTypes {
			names[i] = f.name
		}
		return fmt.Errorf("%w: TYPE %q: want one of %s", errUsage, typeName, strings.Join(names, ", "))
	}
	if *threads < 0 {
		return fmt.Errorf("%w: -t %d: want >= 0 threads (0: one per CPU)", errUsage, *threads)
	}
	if *threads == 0 {
		*threads = runtime.NumCPU()
	}
	// Problems with OUT now, before minutes of work.
	if dir := filepath.Dir(outPath); !isDir(dir) {
		return fmt.Errorf("%w: OUT %s: directory %s does not exist", errUsage, outPath, dir)
	}
	if fi, err := os.Stat(outPath); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%w: OUT %s is a directory", errUsage, outPath)
		}
		if in, err := os.Stat(inPath); err == nil && os.SameFile(fi, in) {
			return fmt.Errorf("%w: OUT %s is the input file", errUsage, outPath)
		}
	}
	f, err := gguf.Open(inPath)
	if err != nil {
		return err
	}
	defer f.Close()
	plan, err := planQuantFile(f, ft, *requant)
	if err != nil {
		return fmt.Errorf("%s: %w", inPath, err)
	}
	if *verbose {
		writeQuantPlan(stdout, plan)
	}
	// Ctrl-C stops at the next piece and removes the unfinished file (a
	// second one exits at once).
	ctx, stop := interruptible(context.Background())
	defer stop()
	opts := quantOptions{threads: *threads, ctx: ctx}
	if isTerminal(stderr) {
		// A line that redraws itself, for a person at a terminal only.
		var last time.Time
		opts.progress = func(done, total int64, name string) {
			if now := time.Now(); now.Sub(last) >= 200*time.Millisecond || done == total {
				last = now
				fmt.Fprintf(stderr, "\rquantize: %3d%% %-48.48s", 100*done/max(total, 1), name)
			}
		}
	}
	start := time.Now()
	n, err := quantizeFile(f, plan, ft, outPath, opts)
	if opts.progress != nil {
		fmt.Fprintf(stderr, "\r%-64s\r", "")
	}
	if errors.Is(err, errInterrupt) {
		return fmt.Errorf("interrupted: %s not written", outPath)
	}
	if err != nil {
		return err
	}
	writeQuantReport(stdout, outPath, ft, f, plan, n, *threads, time.Since(start))
	return nil
}

// planQuantFile reads the model's architecture and shape from f and plans
// its tensors' types, checking that every tensor to convert can be.
func planQuantFile(f *gguf.File, ft quantFType, requant bool) ([]quantChoice, error) {
	arch := f.Architecture()
	if !slices.Contains(quantArchs, arch) {
		return nil, fmt.Errorf("architecture %q: glmrun quantize knows llama-quantize's rules for %s only", arch, strings.Join(quantArchs, " and "))
	}
	m := quantModel{arch: arch}
	layers, err := f.Uint(arch + ".block_count")
	if err != nil {
		return nil, err
	}
	m.layers = int(min(layers, math.MaxInt32))
	if v, ok := f.Lookup(arch + ".expert_count"); ok {
		n, err := v.AsUint()
		if err != nil {
			return nil, fmt.Errorf("key %s.expert_count: %w", arch, err)
		}
		m.experts = int(min(n, math.MaxInt32))
	}
	in := make([]quantTensor, len(f.Tensors))
	for i, t := range f.Tensors {
		in[i] = quantTensor{Name: t.Name, Type: t.Type, Dims: t.Dims}
	}
	plan, err := planQuant(ft, m, in)
	if err != nil {
		return nil, err
	}
	for _, c := range plan {
		if !c.Convert() {
			continue
		}
		switch {
		case c.Type == tensor.F32 || c.Type == tensor.F16 || c.Type == tensor.BF16:
		case !tensor.CanDequantize(c.Type) || c.Type.BlockSize() == 1:
			return nil, fmt.Errorf("tensor %s: cannot convert %s to %s", c.Name, c.Type, c.To)
		case !requant:
			return nil, fmt.Errorf("tensor %s is already quantized (%s, would become %s): quantize from F32, F16 or BF16, or pass --allow-requantize to dequantize it first", c.Name, c.Type, c.To)
		}
		if !tensor.CanQuantize(c.To) {
			return nil, fmt.Errorf("tensor %s: quantization to %s is not supported", c.Name, c.To)
		}
	}
	return plan, nil
}

// writeQuantPlan lists each tensor with its input and output types.
func writeQuantPlan(w io.Writer, plan []quantChoice) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, c := range plan {
		what := "copy"
		if c.Convert() {
			what = c.To.String()
		}
		if c.Fallback() {
			what += fmt.Sprintf(" (for %s: rows of %d)", c.Wanted, c.Dims[0])
		}
		fmt.Fprintf(tw, "[%d/%d]\t%s\t%s\t%s\t-> %s\n", i+1, len(plan), c.Name, formatShape(c.Dims), c.Type, what)
	}
	tw.Flush()
}

// writeQuantReport prints what was written: sizes, the type histogram and
// the fallbacks.
func writeQuantReport(w io.Writer, path string, ft quantFType, f *gguf.File, plan []quantChoice, fileSize int64, threads int, took time.Duration) {
	type stat struct {
		tensors  int
		elements int64
		bytes    int64
	}
	per := map[tensor.Type]*stat{}
	var inBytes, outBytes, elements int64
	fallbacks := 0
	for _, c := range plan {
		src, _ := f.Tensor(c.Name)
		n := src.NumElements()
		size, _ := c.To.RowSize(c.Dims[0])
		size *= src.NumRows()
		s := per[c.To]
		if s == nil {
			s = &stat{}
			per[c.To] = s
		}
		s.tensors++
		s.elements += n
		s.bytes += size
		inBytes += int64(len(src.Data))
		outBytes += size
		elements += n
		if c.Fallback() {
			fallbacks++
		}
	}
	bpw := func(b int64) float64 { return float64(8*b) / float64(max(elements, 1)) }
	fmt.Fprintf(w, "%s: %s, %d tensors, %s -> %s of weights (%.2f -> %.2f bits per weight), file %s, %.1fs with %d threads\n",
		path, ft.name, len(plan), units.Bytes(inBytes), units.Bytes(outBytes), bpw(inBytes), bpw(outBytes),
		units.Bytes(fileSize), took.Seconds(), threads)
	types := make([]tensor.Type, 0, len(per))
	for t := range per {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b tensor.Type) int { return int(per[b].bytes - per[a].bytes) })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\ttensors\telements\tbytes\tshare\t")
	for _, t := range types {
		s := per[t]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f%%\t\n", t, s.tensors, s.elements, s.bytes, 100*float64(s.bytes)/float64(max(outBytes, 1)))
	}
	tw.Flush()
	if fallbacks > 0 {
		fmt.Fprintf(w, "%d tensors fell back to another type: their rows do not fit the chosen type's blocks (as in llama-quantize)\n", fallbacks)
	}
}

// quantOptions tunes quantizeFile.
type quantOptions struct {
	// ctx, if set, stops the work when canceled; the error is its cause.
	ctx     context.Context
	threads int
	// chunkElems is the size of one piece of work, in elements (0: a
	// default); memory use is a few pieces per thread.
	chunkElems int
	// progress, if set, is called after each piece with the input bytes
	// done, their total and the tensor being written.
	progress func(done, total int64, name string)
}

// defaultChunkElems is 1 MiB of float32 per piece: large enough that the
// hand-offs cost nothing next to quantizing, small enough that the few
// pieces in flight per thread keep memory at megabytes.
const defaultChunkElems = 1 << 18

// quantJob is one piece of a tensor: whole rows, converted by a worker and
// written by the writer in order.
type quantJob struct {
	c    *quantChoice
	src  []byte // the input rows
	elem int64  // index of the first element in the tensor, for errors
	n    int    // elements
	out  []byte // the converted rows, owned by the job
	err  error
	done chan struct{}
}

// quantizeFile writes f's tensors, converted as plan says, and its
// metadata (with general.file_type and general.quantization_version
// updated, as llama-quantize does) to path, atomically: a temporary file
// renamed at the end. It returns the file's size. Workers convert pieces of
// rows while the writer writes finished ones in order; a bounded queue
// keeps the workers at most a few pieces ahead, so memory does not grow
// with the model.
func quantizeFile(f *gguf.File, plan []quantChoice, ft quantFType, path string, o quantOptions) (size int64, err error) {
	threads := max(o.threads, 1)
	chunk := o.chunkElems
	if chunk <= 0 {
		chunk = defaultChunkElems
	}
	src := make(map[string]*gguf.TensorInfo, len(f.Tensors))
	var total int64
	for _, t := range f.Tensors {
		src[t.Name] = t
		total += int64(len(t.Data))
	}

	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		switch kv.Key {
		case gguf.KeySplitNo, gguf.KeySplitCount, gguf.KeySplitTensorsCount,
			"general.quantization_version", "general.file_type":
			// llama-quantize drops the split keys and sets these two
			// anew, which puts them last.
			continue
		}
		w.SetKV(kv.Key, kv.Value)
	}
	w.SetKV("general.quantization_version", gguf.Uint32(2))
	w.SetKV("general.file_type", gguf.Uint32(ft.id))

	queue := make(chan *quantJob, 2*threads) // jobs in write order
	work := make(chan *quantJob)
	stop := make(chan struct{})
	bufs := make(chan []byte, 3*threads+1) // output buffers for reuse
	var wg sync.WaitGroup

	// The producer cuts the tensors to convert into pieces of whole rows.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(work)
		for i := range plan {
			c := &plan[i]
			if !c.Convert() {
				continue
			}
			t := src[c.Name]
			width := c.Dims[0]
			inRow, _ := c.Type.RowSize(width)
			outRow, _ := c.To.RowSize(width)
			rows := t.NumRows()
			per := max(1, int64(chunk)/max(width, 1))
			for r := int64(0); r < rows; r += per {
				k := min(per, rows-r)
				j := &quantJob{c: c, src: t.Data[r*inRow : (r+k)*inRow], elem: r * width, n: int(k * width), done: make(chan struct{})}
				j.out = quantGetBuf(bufs, int(k*outRow))
				select {
				case queue <- j:
				case <-stop:
					return
				}
				select {
				case work <- j:
				case <-stop:
					return
				}
			}
		}
	}()
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var x []float32
			for j := range work {
				if cap(x) < j.n {
					x = make([]float32, j.n)
				}
				j.err = quantConvertRows(j, x[:j.n])
				close(j.done)
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var done int64
	streams := make([]gguf.StreamTensor, len(plan))
	for i := range plan {
		c := &plan[i]
		t := src[c.Name]
		streams[i] = gguf.StreamTensor{Name: c.Name, Type: c.To, Dims: c.Dims, Write: func(out io.Writer) error {
			defer quantReleasePages(t.Data)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if !c.Convert() {
				if _, err := out.Write(t.Data); err != nil {
					return err
				}
				done += int64(len(t.Data))
				if o.progress != nil {
					o.progress(done, total, c.Name)
				}
				return nil
			}
			want := t.NumElements()
			for got := int64(0); got < want; {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				j := <-queue
				<-j.done
				if j.err != nil {
					return j.err
				}
				if _, err := out.Write(j.out); err != nil {
					return err
				}
				got += int64(j.n)
				done += int64(len(j.src))
				quantPutBuf(bufs, j.out)
				quantReleasePages(j.src) // a large tensor's pages go as it is written
				if o.progress != nil {
					o.progress(done, total, c.Name)
				}
			}
			return nil
		}}
	}

	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if size, err = w.WriteStream(tmp, streams); err != nil {
		// The gguf error names the tensor; say which file it was for.
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	return size, nil
}

// quantConvertRows converts one job's rows through float32 (x, its scratch):
// dequantize (for F32, F16 and BF16 a plain conversion), check that every
// value is finite (llama-quantize refuses to write non-finite blocks), and
// quantize.
func quantConvertRows(j *quantJob, x []float32) error {
	if err := tensor.Dequantize(j.c.Type, j.src, x); err != nil {
		return fmt.Errorf("tensor %s: %w", j.c.Name, err)
	}
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("tensor %s: element %d is %v; a model with non-finite weights cannot be quantized", j.c.Name, j.elem+int64(i), v)
		}
	}
	if err := tensor.Quantize(j.c.To, x, j.out); err != nil {
		return fmt.Errorf("tensor %s: %w", j.c.Name, err)
	}
	return nil
}

// quantReleasePages tells the kernel that the mapped input pages wholly inside
// b will not be read again, once the writer is done with a tensor: they
// stay in the page cache, but leave the process's resident set, which
// would otherwise grow to the size of the model (llama-quantize unmaps
// each tensor for the same reason). It is only advice; errors are ignored.
func quantReleasePages(b []byte) {
	if len(b) < 2*os.Getpagesize() {
		return
	}
	_ = mmap.DontNeedWithin(b)
}

// quantGetBuf returns a buffer of n bytes, reusing a returned one when it is
// large enough.
func quantGetBuf(pool chan []byte, n int) []byte {
	select {
	case b := <-pool:
		if cap(b) >= n {
			return b[:n]
		}
	default:
	}
	return make([]byte, n)
}

// quantPutBuf hands a buffer back for reuse (or drops it when enough are kept).
func quantPutBuf(pool chan []byte, b []byte) {
	select {
	case pool <- b:
	default:
	}
}
