package model

import (
	"fmt"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend"
)

// shard is what one device holds (see Plan).
type shard struct {
	dev     backend.Device
	index   int
	embd    backend.Weight // device 0 only
	output  backend.Weight // device 0 only
	outNorm backend.Buffer // device 0 only
	layers  []shardLayer   // trunk layers, then the MTP block (Options.MTP)
	mtp     *mtpHead       // the MTP block's own tensors (device 0, Options.MTP)
}

// shardLayer is one block on one device.
type shardLayer struct {
	attnNorm, ffnNorm backend.Buffer
	attn              *attention.Shard
	dense             *ffnShard
	moe               *moeShard
}

// ffnShard is a SwiGLU FFN's columns [lo, lo+F) on one device.
type ffnShard struct {
	gate, up, down backend.Weight
}

// moeShard is a MoE block on one device: the router (replicated), the
// device's experts and its part of the shared experts. With the routed
// experts on the CPU (Options.CPUMoE) the plan's devices hold only the
// shared part, and the CPU device a moeShard of the router and every
// expert.
type moeShard struct {
	router  backend.Weight
	r       backend.Router
	experts backend.Experts
	shared  *ffnShard
}

// upload puts every device's shard of the trunk on it, and the routed
// experts of the first nCPUMoE blocks on the experts' CPU device.
func (m *Model) upload() error {
	m.shards = make([]*shard, len(m.devs))
	for d, dev := range m.devs {
		sh, err := m.uploadShard(d, dev)
		if err != nil {
			return err
		}
		m.shards[d] = sh
	}
	if m.experts == nil {
		return nil
	}
	u := &devUploader{dev: m.experts}
	m.cpuMoE = make([]*moeShard, m.blocks())
	for l := range m.nCPUMoE {
		if mo := m.w.Layers[l].MoE; mo != nil {
			m.cpuMoE[l] = u.routed(&m.cfg, fmt.Sprintf("blk.%d.", l), mo, 0, m.cfg.Experts)
		}
	}
	return u.err
}

// devUploader uploads to one device, keeping the first error.
type devUploader struct {
	dev backend.Device
	err error
}

func (u *devUploader) fail(err error) {
	if u.err == nil && err != nil {
		u.err = err
	}
}

func (u *devUploader) matrix(mat backend.Matrix) backend.Weight {
	if u.err != nil {
		return nil
	}
	w, err := u.dev.Upload(mat)
	u.fail(err)
	return w
}

func (u *devUploader) vector(name string, v []float32) backend.Buffer {
	if u.err != nil || v == nil {
		return nil
	}
	b, err := u.dev.UploadVector(name, v)
	u.fail(err)
	return b
}

// ffn uploads columns [lo, lo+n) of f's intermediate dimension.
func (u *devUploader) ffn(f *FFN, lo, n int) *ffnShard {
	s := &ffnShard{
		gate: u.matrix(f.Gate.Slice(lo, n)),
		up:   u.matrix(f.Up.Slice(lo, n)),
	}
	if n == f.Down.Cols {
		s.down = u.matrix(f.Down)
	} else if down, err := f.Down.SliceCols(lo, n); err != nil {
		u.fail(err)
	} else {
		s.down = u.matrix(down)
	}
	return s
}

// routed uploads a MoE block's router and its experts [first, first+n).
func (u *devUploader) routed(c *Config, pre string, mo *MoE, first, n int) *moeShard {
	ms := &moeShard{router: u.matrix(mo.Router)}
	ms.r = backend.Router{
		Experts: c.Experts, Used: c.ExpertsUsed, Gating: backend.Gating(c.Gating),
		Bias:   u.vector(pre+"exp_probs_b.bias", mo.Bias),
		Groups: c.ExpGroups, GroupsUse: c.ExpGroupsUse,
		NormWeights: c.ExpWeightsNorm, Scale: c.ExpWeightsScale,
	}
	ms.experts.First = first
	for e := first; e < first+n; e++ {
		x := &mo.Experts[e]
		ms.experts.Gate = append(ms.experts.Gate, u.matrix(x.Gate))
		ms.experts.Up = append(ms.experts.Up, u.matrix(x.Up))
		ms.experts.Down = append(ms.experts.Down, u.matrix(x.Down))
	}
	return ms
}

func (m *Model) uploadShard(d int, dev backend.Device) (*shard, error) {
	c, p, w := &m.cfg, &m.plan, m.w
	u := &devUploader{dev: dev}
	sh := &shard{dev: dev, index: d, layers: make([]shardLayer, m.blocks())}
	if d == 0 {
		embd := w.TokenEmbd
		embd.LookupOnly = w.Output.Name != w.TokenEmbd.Name
		embd.Head = !embd.LookupOnly // tied: the embeddings are the head
		sh.embd = u.matrix(embd)
		sh.output = sh.embd
		if embd.LookupOnly {
			out := w.Output
			out.Head = true
			sh.output = u.matrix(out)
		}
		sh.outNorm = u.vector("output_norm.weight", w.OutputNorm)
	}
	for l := range sh.layers {
		ly, sl := &w.Layers[l], &sh.layers[l]
		pre := fmt.Sprintf("blk.%d.", l)
		sl.attnNorm = u.vector(pre+"attn_norm.weight", ly.AttnNorm)
		sl.ffnNorm = u.vector(pre+"ffn_norm.weight", ly.FFNNorm)
		if u.err == nil {
			sl.attn, u.err = ly.Attn.Upload(dev, &m.attnCfg, d*p.Heads, p.Heads)
		}
		switch {
		case ly.Dense != nil:
			sl.dense = u.ffn(ly.Dense, d*p.FF, p.FF)
		case ly.MoE != nil:
			mo := ly.MoE
			ms := &moeShard{}
			if l >= m.nCPUMoE {
				ms = u.routed(c, pre, mo, d*p.Experts, p.Experts)
			}
			if mo.Shared != nil {
				ms.shared = u.ffn(mo.Shared, d*p.SharedFF, p.SharedFF)
			}
			sl.moe = ms
		}
		if u.err != nil {
			return nil, u.err
		}
	}
	if d == 0 && len(sh.layers) > c.Layers {
		m.uploadMTP(u, sh)
	}
	if u.err != nil {
		return nil, u.err
	}
	return sh, nil
}

// blocks returns the number of blocks the devices hold: the trunk's, and
// the MTP block when it is loaded.
func (m *Model) blocks() int {
	if m.mtp {
		return m.cfg.Layers + 1
	}
	return m.cfg.Layers
}
