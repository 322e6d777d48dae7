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
	return out, &Collective{devs: devs}, nil
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
	closeAll := func() {
		for _, d := range devs {
			d.Close()
		}
	}
	for i := 0; i < c.Devices; i++ {
		g, err := newGPU(drv, i%int(n))
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("cuda:%d: %w", i, err)
		}
		d := &Device{g: g, index: i, sigs: sigs, budget: c.Memory, perGPU: perGPU, fast: c.Fast}
		if d.budget == 0 {
			d.budget = int64(g.total) / int64(perGPU)
		}
		devs = append(devs, d)
		if d.mod, err = g.loadModule(ptxSource, names); err != nil {
			closeAll()
			return nil, fmt.Errorf("cuda:%d: loading the kernels: %w", i, err)
		}
	}
	return devs, nil
}

// Collective sums and broadcasts buffers across devices through host
// memory, in device order (deterministic). NCCL and peer-to-peer copies
// are later work.
type Collective struct {
	devs []*Device
	sum  []float32
	tmp  []float32
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

var _ backend.Device = (*Device)(nil)
