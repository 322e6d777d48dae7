package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/tensor"
)

// tpReport is inspect --tp N: what each of N devices would hold under the
// model's tensor-parallel plan (model.Plan), from the header alone.
type tpReport struct {
	Devices          int        `json:"devices"`
	HeadsPerDevice   int        `json:"heads_per_device"`
	ExpertsPerDevice int        `json:"experts_per_device"`
	FFPerDevice      int        `json:"ff_per_device,omitempty"`
	SharedFFPerDev   int        `json:"shared_ff_per_device,omitempty"`
	TotalBytes       int64      `json:"total_bytes"` // all tensors of the file
	PerDevice        []tpDevice `json:"per_device"`
}

type tpDevice struct {
	Device       int   `json:"device"`
	WeightBytes  int64 `json:"weight_bytes"`
	Replicated   int64 `json:"replicated_bytes"`
	Sharded      int64 `json:"sharded_bytes"`
	Device0Only  int64 `json:"device0_bytes"`
	ExpandedF32  int64 `json:"expanded_f32_bytes,omitempty"`
	KVPerToken   int64 `json:"kv_bytes_per_token"`
	KVFullContxt int64 `json:"kv_bytes_full_context"`
}

// newTPReport plans the model in f over n devices.
func newTPReport(f *gguf.File, n int, cacheType tensor.Type) (*tpReport, error) {
	c, err := model.ReadConfig(f)
	if err != nil {
		return nil, err
	}
	p, err := model.NewPlan(&c, n)
	if err != nil {
		return nil, err
	}
	mem, err := p.Memory(&c, model.FileTensors(f), cacheType)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	r := &tpReport{Devices: n, HeadsPerDevice: p.Heads, ExpertsPerDevice: p.Experts, FFPerDevice: p.FF,
		SharedFFPerDev: p.SharedFF, TotalBytes: mem.Total}
	for d, dm := range mem.Devices {
		r.PerDevice = append(r.PerDevice, tpDevice{
			Device: d, WeightBytes: dm.Weights(), Replicated: dm.Replicated, Sharded: dm.Sharded,
			Device0Only: dm.First, ExpandedF32: dm.Expanded, KVPerToken: dm.KVPerToken,
			KVFullContxt: dm.KVPerToken * int64(c.ContextLength),
		})
	}
	return r, nil
}

// writeText prints the per-device table.
func (r *tpReport) writeText(w io.Writer) error {
	fmt.Fprintf(w, "\ntensor parallel over %d devices: %d heads, %d experts", r.Devices, r.HeadsPerDevice, r.ExpertsPerDevice)
	if r.FFPerDevice > 0 {
		fmt.Fprintf(w, ", dense FFN %d", r.FFPerDevice)
	}
	if r.SharedFFPerDev > 0 {
		fmt.Fprintf(w, ", shared expert %d", r.SharedFFPerDev)
	}
	fmt.Fprintln(w, " per device")
	fmt.Fprintln(w, "(attention heads, FFN columns and experts split; latent projections, indexer, router and KV cache replicated; embeddings and output head on device 0)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "device\tweights\treplicated\tsharded\tdevice 0 only\tKV/token\tKV at full context\t")
	for _, d := range r.PerDevice {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d B\t%s\t\n", d.Device, units.Bytes(d.WeightBytes), units.Bytes(d.Replicated),
			units.Bytes(d.Sharded), units.Bytes(d.Device0Only), d.KVPerToken, units.Bytes(d.KVFullContxt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var sharded, expanded int64
	for _, d := range r.PerDevice {
		sharded += d.Sharded
		expanded += d.ExpandedF32
	}
	d0 := r.PerDevice[0]
	_, err := fmt.Fprintf(w, "file tensors %d bytes; shards %d + replicated %d + device 0 only %d = %d bytes\n",
		r.TotalBytes, sharded, d0.Replicated, d0.Device0Only, sharded+d0.Replicated+d0.Device0Only)
	if err == nil && expanded > 0 {
		_, err = fmt.Fprintf(w, "(%d bytes of column shards not on quantization block boundaries are kept as F32)\n", expanded)
	}
	return err
}
