package cuda

import (
	"errors"
	"fmt"

	"github.com/glmrun/glmrun/backend"
)

func init() { backend.Register("cuda", Open) }

// Open loads the driver, opens c.Devices GPUs (ordinals 0 …), loads the
// kernel module on each and returns them with the collective that joins
// them. c.Memory is the per-device budget (0: the device's memory).
// More devices than GPUs are logical devices spread evenly over them
// (device i on GPU i mod GPUs, each with its own stream, kernels and an
// equal share of the GPU's memory), so that one GPU can run tensor
// parallelism; the count must then be a multiple of the GPUs. Without a
// driver or enough devices it returns an error wrapping ErrNoDriver or
// ErrNoDevice.
func Open(c backend.Config) ([]backend.Device, backend.Collective, error) {
	devs, err := OpenDevices(c)
	if err != nil {
		return nil, nil, err
	}
	out := make([]backend.Device, len(devs))
	for i, d := range devs {
		out[i] = d
	}
	coll := &Collective{devs: devs}
	switch c.Collectives {
	case "", "p2p":
		coll.p2p = devs[0].g.drv.p2p && devs[0].g.event != 0
		if c.Collectives == "p2p" && !coll.p2p {
			closeDevices(devs)
			return nil, nil, fmt.Errorf("cuda: collectives p2p: the driver %s lacks peer copies or events", devs[0].g.drv.path)
		}
	case "host":
	case "nccl":
		if len(devs) > 1 {
			comms, err := newNCCL(devs)
			if err != nil {
				closeDevices(devs)
				return nil, nil, fmt.Errorf("cuda: collectives nccl: %w", err)
			}
			coll.nccl = comms
			devs[0].closers = append(devs[0].closers, comms.close)
		}
	default:
		closeDevices(devs)
		return nil, nil, fmt.Errorf("cuda: collectives %q: want p2p, nccl or host", c.Collectives)
	}
	if coll.p2p {
		if err := coll.enablePeers(); err != nil {
			closeDevices(devs)
			return nil, nil, err
		}
	}
	return out, coll, nil
}

// closeDevices closes every device of devs.
func closeDevices(devs []*Device) {
	for _, d := range devs {
		d.Close()
	}
}

// OpenDevices is Open returning the concrete devices.
func OpenDevices(c backend.Config) ([]*Device, error) {
	if c.Devices < 1 {
		return nil, fmt.Errorf("cuda: %d devices, want at least 1", c.Devices)
	}
	if c.Memory < 0 {
		return nil, fmt.Errorf("cuda: negative memory budget %d", c.Memory)
	}
	drv, err := loadDriver(libraryPath())
	if err != nil {
		return nil, err
	}
	if err := drv.check("cuInit", drv.cuInit(0)); err != nil {
		var ce *Error
		if errors.As(err, &ce) && (ce.Code == errNoDevice || ce.Code == errInvalidDevice) {
			return nil, fmt.Errorf("%w: %v", ErrNoDevice, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	var n int32
	if err := drv.check("cuDeviceGetCount", drv.cuDeviceGetCount(&n)); err != nil {
		return nil, err
	}
	if int(n) < c.Devices && (n < 1 || c.Devices%int(n) != 0) {
		return nil, fmt.Errorf("%w: %d requested, %d present (more devices than GPUs share them evenly: ask for a multiple of %d)",
			ErrNoDevice, c.Devices, n, n)
	}
	perGPU := max(1, c.Devices/int(n))
	sigs := Signatures()
	names := make([]string, 0, len(sigs))
	for name := range sigs {
		names = append(names, name)
	}
	var devs []*Device
	for i := 0; i < c.Devices; i++ {
		g, err := newGPU(drv, i%int(n))
		if err != nil {
			closeDevices(devs)
			return nil, fmt.Errorf("cuda:%d: %w", i, err)
		}
		d := &Device{g: g, index: i, sigs: sigs, budget: c.Memory, perGPU: perGPU, fast: c.Fast}
		if d.budget == 0 {
			d.budget = int64(g.total) / int64(perGPU)
		}
		devs = append(devs, d)
		if d.mod, err = g.loadModule(ptxSource, names); err != nil {
			closeDevices(devs)
			return nil, fmt.Errorf("cuda:%d: loading the kernels: %w", i, err)
		}
	}
	return devs, nil
}

// Collective sums and broadcasts buffers across devices, in device order
// (deterministic): by default device to device (p2p), each device's
// part copied to device 0's stream once its own stream has reached it
// (an event), summed there in order, and copied back the same way, with
// no host synchronisation; with backend.Config.Collectives "host"
// through host memory; with "nccl", by NCCL's ncclAllReduce and
// ncclBroadcast (one GPU a device). p2p and host give the same values bit
// for bit; NCCL sums in its own order (its rings), deterministic for a
// given set of GPUs.
type Collective struct {
	devs []*Device
	p2p  bool
	nccl *ncclComms
	sum  []float32
	tmp  []float32
}

// errPeerEnabled is CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED.
const errPeerEnabled = 704

// enablePeers lets every device's context reach the others' memory
// where the GPUs can (peer copies between GPUs that cannot are staged by
// the driver; logical devices on one GPU share its context).
func (c *Collective) enablePeers() error {
	for _, a := range c.devs {
		for _, b := range c.devs {
			if a.g.ordinal == b.g.ordinal {
				continue
			}
			g, peer := a.g, b.g
			err := g.do(func() error {
				var can int32
				if err := g.drv.check("cuDeviceCanAccessPeer", g.drv.cuDeviceCanAccessPeer(&can, int32(g.ordinal), int32(peer.ordinal))); err != nil || can == 0 {
					return err
				}
				if code := g.drv.cuCtxEnablePeerAccess(peer.ctx, 0); code != 0 && code != errPeerEnabled {
					return g.drv.check("cuCtxEnablePeerAccess", code)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: peer access to GPU %d: %w", a.Name(), peer.ordinal, err)
			}
		}
	}
	return nil
}

// record records g's event after the work queued on its stream.
func (g *gpu) record() error {
	return g.do(func() error { return g.drv.check("cuEventRecord", g.drv.cuEventRecord(g.event, g.stream)) })
}

// waitFor makes g's stream wait for the work before the last record of
// each of others' events (on the thread of g, in a call).
func (g *gpu) waitFor(others ...*gpu) error {
	for _, o := range others {
		if o == g {
			continue
		}
		if err := g.drv.check("cuStreamWaitEvent", g.drv.cuStreamWaitEvent(g.stream, o.event, 0)); err != nil {
			return err
		}
	}
	return nil
}

// peerCopy queues a copy of n bytes from src on GPU from to dst on g, on
// g's stream (on the thread of g, in a call).
func (g *gpu) peerCopy(dst, src uint64, from *gpu, n int64) error {
	g.queued = true
	return g.drv.check("cuMemcpyPeerAsync", g.drv.cuMemcpyPeerAsync(dst, g.ctx, src, from.ctx, uint64(n), g.stream))
}

// allReduceP2P sums the buffers on device 0's stream in device order and
// copies the sum back, ordered by events, without waiting for any stream.
func (c *Collective) allReduceP2P(bufs []backend.Buffer) error {
	n := bufs[0].Len()
	d0, g0 := c.devs[0], c.devs[0].g
	recv := d0.scratchF32("coll.recv", n*(len(bufs)-1)) // before the calls: growing it syncs
	gs := make([]*gpu, len(c.devs))
	for i, d := range c.devs {
		gs[i] = d.g
	}
	for _, g := range gs[1:] {
		if err := g.record(); err != nil {
			return err
		}
	}
	grid, block := elementwiseDims(n)
	err := g0.do(func() error {
		if err := g0.waitFor(gs[1:]...); err != nil {
			return err
		}
		for i := 1; i < len(bufs); i++ {
			if err := g0.peerCopy(recv.ptr+uint64(4*n*(i-1)), c.devs[i].ptr(bufs[i]), gs[i], 4*int64(n)); err != nil {
				return err
			}
		}
		for i := 1; i < len(bufs); i++ { // add_f32 launched here, between graph segments
			cmd := d0.launchCommand("add_f32", grid, block, 0, d0.ptr(bufs[0]), recv.ptr+uint64(4*n*(i-1)), i32(n))
			g0.launchNow(&cmd)
		}
		return g0.drv.check("cuEventRecord", g0.drv.cuEventRecord(g0.event, g0.stream))
	})
	if err != nil {
		return err
	}
	return c.fromRoot(bufs, 0)
}

// fromRoot copies bufs[root] to the other buffers on their streams after
// root's last recorded event, and makes root's stream wait for the
// copies before it overwrites its buffer.
func (c *Collective) fromRoot(bufs []backend.Buffer, root int) error {
	gr := c.devs[root].g
	var others []*gpu
	for i, d := range c.devs {
		if i == root {
			continue
		}
		g := d.g
		err := g.do(func() error {
			if err := g.waitFor(gr); err != nil {
				return err
			}
			if err := g.peerCopy(d.ptr(bufs[i]), c.devs[root].ptr(bufs[root]), gr, 4*int64(bufs[i].Len())); err != nil {
				return err
			}
			return g.drv.check("cuEventRecord", g.drv.cuEventRecord(g.event, g.stream))
		})
		if err != nil {
			return err
		}
		others = append(others, g)
	}
	return gr.do(func() error { return gr.waitFor(others...) })
}

// Devices returns the group size.
func (c *Collective) Devices() int { return len(c.devs) }

func (c *Collective) check(op string, bufs []backend.Buffer) error {
	if len(bufs) != len(c.devs) {
		return fmt.Errorf("cuda: %s over %d buffers, want one per device (%d)", op, len(bufs), len(c.devs))
	}
	for i, b := range bufs {
		if b.Len() != bufs[0].Len() {
			return fmt.Errorf("cuda: %s: buffer %d has %d values, buffer 0 %d", op, i, b.Len(), bufs[0].Len())
		}
		if v, ok := b.(*buffer); !ok || v.d != c.devs[i] {
			return fmt.Errorf("cuda: %s: buffer %d is not on %s", op, i, c.devs[i].Name())
		}
	}
	return nil
}

// AllReduce replaces every buffer by the sum (((b0 + b1) + b2) + …).
func (c *Collective) AllReduce(bufs []backend.Buffer) error {
	if err := c.check("AllReduce", bufs); err != nil {
		return err
	}
	if len(bufs) == 1 {
		return nil
	}
	if c.nccl != nil {
		n := uint64(bufs[0].Len())
		return c.failed(c.nccl.group(c.devs, "ncclAllReduce", func(i int) int32 {
			p := c.devs[i].ptr(bufs[i])
			return c.nccl.lib.ncclAllReduce(p, p, n, ncclFloat32, ncclSum, c.nccl.comms[i], c.devs[i].g.stream)
		}))
	}
	if c.p2p {
		return c.failed(c.allReduceP2P(bufs))
	}
	n := bufs[0].Len()
	if cap(c.sum) < n {
		c.sum, c.tmp = make([]float32, n), make([]float32, n)
	}
	s, t := c.sum[:n], c.tmp[:n]
	c.devs[0].Read(s, bufs[0])
	for i, b := range bufs[1:] {
		c.devs[i+1].Read(t, b)
		for j := range s {
			s[j] += t[j]
		}
	}
	for i, b := range bufs {
		c.devs[i].Write(b, s)
	}
	return nil
}

// Broadcast copies bufs[root] to the others.
func (c *Collective) Broadcast(bufs []backend.Buffer, root int) error {
	if err := c.check("Broadcast", bufs); err != nil {
		return err
	}
	if root < 0 || root >= len(bufs) {
		return fmt.Errorf("cuda: Broadcast root %d outside [0, %d)", root, len(bufs))
	}
	if c.nccl != nil {
		n := uint64(bufs[0].Len())
		return c.failed(c.nccl.group(c.devs, "ncclBroadcast", func(i int) int32 {
			p := c.devs[i].ptr(bufs[i])
			return c.nccl.lib.ncclBroadcast(p, p, n, ncclFloat32, int32(root), c.nccl.comms[i], c.devs[i].g.stream)
		}))
	}
	if c.p2p {
		if err := c.devs[root].g.record(); err != nil {
			return c.failed(err)
		}
		return c.failed(c.fromRoot(bufs, root))
	}
	n := bufs[0].Len()
	if cap(c.sum) < n {
		c.sum, c.tmp = make([]float32, n), make([]float32, n)
	}
	s := c.sum[:n]
	c.devs[root].Read(s, bufs[root])
	for i, b := range bufs {
		if i != root {
			c.devs[i].Write(b, s)
		}
	}
	return nil
}

// failed records a collective's driver error as every device's fault
// (their buffers are then undefined) and returns it.
func (c *Collective) failed(err error) error {
	if err != nil {
		for _, d := range c.devs {
			d.fail(err)
		}
	}
	return err
}

var _ backend.Device = (*Device)(nil)
