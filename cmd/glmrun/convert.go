package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/glmrun/glmrun/convert"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/tensor"
)

const convertUsage = `usage: glmrun convert HF_DIR -o OUT.gguf [--outtype f32|f16|bf16|q8_0|auto] [--no-mtp]

Converts a Hugging Face checkpoint directory (config.json, safetensors
weights, tokenizer.json) of GLM-5 / 5.1 / 5.2 (GlmMoeDsaForCausalLM, to
glm-dsa), GLM-4.7-Flash (Glm4MoeLiteForCausalLM) or DeepSeek-V3
(DeepseekV3ForCausalLM, both to deepseek2) into a GGUF file: the file
llama.cpp's convert_hf_to_gguf.py writes, with the same metadata and the
same tensor bytes. FP8 checkpoints (F8_E4M3 weights with weight_scale_inv
block scales) are dequantized as value × scale in float32. Vectors, norms
and the router are always F32. It streams tensor by tensor: memory holds
a few chunks, not the model. docs/FILE-LAYOUTS.md section 7 lists the rules.

flags:
`

// runConvert is "glmrun convert".
func runConvert(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("convert", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, convertUsage); fs.PrintDefaults() }
	out := fs.String("o", "", "output `OUT.gguf` (required)")
	outType := fs.String("outtype", convert.OutAuto, "weight `type`: f32, f16, bf16, q8_0, or auto (the checkpoint's bf16/f16)")
	noMTP := fs.Bool("no-mtp", false, "drop the NextN (multi-token prediction) blocks")
	pos, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want one HF_DIR, have %d arguments", errUsage, len(pos))
	}
	dir := pos[0]
	if *out == "" {
		return fmt.Errorf("%w: -o OUT.gguf is required", errUsage)
	}
	switch t := strings.ToLower(*outType); t {
	case convert.OutF32, convert.OutF16, convert.OutBF16, convert.OutQ8_0, convert.OutAuto:
	default:
		return fmt.Errorf("%w: --outtype %q: want f32, f16, bf16, q8_0 or auto", errUsage, *outType)
	}
	if !isDir(dir) {
		return fmt.Errorf("%w: HF_DIR %s is not a directory", errUsage, dir)
	}
	if d := filepath.Dir(*out); !isDir(d) {
		return fmt.Errorf("%w: -o %s: directory %s does not exist", errUsage, *out, d)
	}
	if isDir(*out) {
		return fmt.Errorf("%w: -o %s is a directory", errUsage, *out)
	}
	opts := convert.Options{OutType: *outType, NoMTP: *noMTP}
	tty := isTerminal(stderr)
	if tty {
		// A line that redraws itself, for a person at a terminal only.
		var last time.Time
		opts.Progress = func(done, total int64) {
			if now := time.Now(); now.Sub(last) >= 200*time.Millisecond || done == total {
				last = now
				fmt.Fprintf(stderr, "\rconvert: %3d%% of %s", 100*done/max(total, 1), units.Bytes(total))
			}
		}
	}
	start := time.Now()
	r, err := convert.Convert(dir, *out, opts)
	if tty {
		fmt.Fprintf(stderr, "\r%-40s\r", "")
	}
	if err != nil {
		return err
	}
	writeConvertReport(stdout, r, time.Since(start))
	return nil
}

// writeConvertReport tells what was written.
func writeConvertReport(w io.Writer, r *convert.Result, took time.Duration) {
	types := make([]tensor.Type, 0, len(r.TypeCounts))
	for t := range r.TypeCounts {
		types = append(types, t)
	}
	slices.Sort(types)
	counts := make([]string, len(types))
	for i, t := range types {
		counts[i] = fmt.Sprintf("%d %s", r.TypeCounts[t], t)
	}
	mtp := ""
	if r.NextN > 0 {
		mtp = fmt.Sprintf(" (%d NextN)", r.NextN)
	}
	fmt.Fprintf(w, "%s: %s %q from %s, %d blocks%s, %s weights\n", r.Path, r.Arch, r.Name, r.HFArch, r.Blocks, mtp, r.OutType)
	fmt.Fprintf(w, "  %d tensors (%s), %.4g M parameters, %s\n", r.Tensors, strings.Join(counts, ", "), float64(r.Params)/1e6, units.Bytes(r.FileBytes))
	secs := took.Seconds()
	fmt.Fprintf(w, "  %.1fs, %.0f MB/s of tensor data\n", secs, float64(r.DataBytes)/1e6/max(secs, 1e-9))
}
