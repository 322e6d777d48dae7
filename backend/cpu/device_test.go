package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// TestCollective: AllReduce adds in device order and leaves the same sum
// everywhere; Broadcast copies the root; bad arguments are errors.
func TestCollective(t *testing.T) {
	c := NewCollective(3)
	// (1e8 + 1) − 1e8 is 0 in float32; any other order gives 1 or 0.
	bufs := []backend.Buffer{buf{1e8, 2}, buf{1, 3}, buf{-1e8, 4}}
	if err := c.AllReduce(bufs); err != nil {
		t.Fatal(err)
	}
	for d, b := range bufs {
		if got := F32(b); !slices.Equal(got, []float32{0, 9}) {
			t.Errorf("device %d: %v, want [0 9]", d, got)
		}
	}
	bufs = []backend.Buffer{buf{1}, buf{2}, buf{3}}
	if err := c.Broadcast(bufs, 1); err != nil {
		t.Fatal(err)
	}
	for d, b := range bufs {
		if F32(b)[0] != 2 {
			t.Errorf("broadcast: device %d has %v", d, F32(b))
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"count", c.AllReduce(bufs[:2]), "2 buffers"},
		{"lengths", c.AllReduce([]backend.Buffer{buf{1}, buf{2, 3}, buf{4}}), "buffer 1 has 2 values"},
		{"root", c.Broadcast(bufs, 3), "root 3"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestBudget: allocations and uploads count against the budget and fail,
// naming the device, when they do not fit; Free gives the bytes back.
func TestBudget(t *testing.T) {
	d := NewDevice(2, 1, 1000)
	b, err := d.Alloc(200)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(100); err == nil || !strings.Contains(err.Error(), "cpu:2") || !strings.Contains(err.Error(), "800 of 1000") {
		t.Errorf("over budget: %v", err)
	}
	m, err := backend.NewMatrix("blk.0.w", tensor.F32, 2, 32, make([]byte, 256))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Upload(m); err == nil || !strings.Contains(err.Error(), "blk.0.w") {
		t.Errorf("upload over budget: %v", err)
	}
	d.Free(b)
	if _, err := d.Upload(m); err != nil || d.Used() != 256 {
		t.Errorf("upload after Free: %v, %d bytes used", err, d.Used())
	}
	bad, _ := backend.NewMatrix("tq", tensor.TQ1_0, 1, 256, make([]byte, 54))
	if _, err := d.Upload(bad); err == nil || !strings.Contains(err.Error(), "tq") {
		t.Errorf("unsupported type: %v", err)
	}
}

// TestRowOps: the device's strided RMSNorm and Rope match the row kernels.
func TestRowOps(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	d := NewDevice(0, 1, 0)
	const rows, stride, n = 3, 12, 8
	x := randVec(r, rows*stride)
	w := randVec(r, n)
	wb, _ := d.UploadVector("w", w)
	got := slices.Clone(x)
	d.RMSNorm(buf(got), buf(got), rows, stride, wb, 1e-5)
	rope := Rope{Dims: 4, Base: 10000, FreqScale: 1, AttnFactor: 1}
	d.Rope(buf(got), rows, 2, stride/2, 2, 7, rope)
	want := slices.Clone(x)
	tab := make([]float32, 4)
	for i := 0; i < rows; i++ {
		row := want[i*stride : (i+1)*stride]
		RMSNorm(row[:n], row[:n], w, 1e-5)
		RopeTable(tab, &rope, 7+i)
		RopeNorm(row[2:6], tab)
		RopeNorm(row[8:12], tab)
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// TestAddRMSNorm: the fused residual add and norm gives Add then RMSNorm
// bit for bit, and leaves the values between strided rows alone.
func TestAddRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	d := NewDevice(0, 1, 0)
	for _, tc := range []struct{ rows, stride, n int }{{1, 8, 8}, {3, 8, 8}, {3, 12, 8}} {
		h, delta := randVec(r, tc.rows*tc.stride), randVec(r, tc.rows*tc.stride)
		w := randVec(r, tc.n)
		wb, _ := d.UploadVector("w", w)
		gotH, gotX := slices.Clone(h), make([]float32, len(h))
		d.AddRMSNorm(buf(gotX), buf(gotH), buf(delta), tc.rows, tc.stride, wb, 1e-5)
		wantH, wantX := slices.Clone(h), make([]float32, len(h))
		for i := 0; i < tc.rows; i++ {
			row := wantH[i*tc.stride : i*tc.stride+tc.n]
			Add(row, delta[i*tc.stride:i*tc.stride+tc.n])
			RMSNorm(wantX[i*tc.stride:i*tc.stride+tc.n], row, w, 1e-5)
		}
		if !slices.Equal(gotH, wantH) || !slices.Equal(gotX, wantX) {
			t.Errorf("%+v: got h %v x %v\nwant h %v x %v", tc, gotH, gotX, wantH, wantX)
		}
	}
}

// TestRouter checks RouterTopK on one token by hand: sigmoid gating, a
// bias that changes the choice but not the weights, normalization and
// scale; and group-limited selection.
func TestRouter(t *testing.T) {
	d := NewDevice(0, 1, 0)
	logits := buf{0, 2, 1, -1}
	bias := buf{0, 0, 0, 5}
	ids := make(ids, 2)
	w := make(buf, 2)
	d.RouterTopK(ids, w, logits, 1, &backend.Router{Experts: 4, Used: 2, Gating: backend.GatingSigmoid,
		Bias: bias, Groups: 1, GroupsUse: 1, NormWeights: true, Scale: 2})
	s1, s3 := Sigmoid(2), Sigmoid(-1)
	if !slices.Equal(ids, []int32{3, 1}) || math.Abs(float64(w[0]-2*s3/(s1+s3))) > 1e-6 || math.Abs(float64(w[1]-2*s1/(s1+s3))) > 1e-6 {
		t.Errorf("ids %v weights %v", ids, w)
	}
	// Groups {0,1} and {2,3}: expert 0 is best, but the second group has
	// the best pair sum.
	d.RouterTopK(ids, w, buf{3, -5, 2.5, 2.5}, 1, &backend.Router{Experts: 4, Used: 2, Gating: backend.GatingSoftmax,
		Groups: 2, GroupsUse: 1})
	if !slices.Equal(ids, []int32{2, 3}) {
		t.Errorf("group-limited ids %v, want [2 3]", ids)
	}
}

// TestMoESplit: experts split over two devices give partial sums that add
// up to one device's result.
func TestMoESplit(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	const E, F, X, K, T = 32, 16, 4, 2, 5
	mat := func(rows, cols int) backend.Matrix {
		m, _ := backend.NewMatrix("e", tensor.F32, rows, cols, f32bytes(randVec(r, rows*cols)))
		return m
	}
	var host [][3]backend.Matrix // gate, up, down per expert
	for range X {
		host = append(host, [3]backend.Matrix{mat(F, E), mat(F, E), mat(E, F)})
	}
	experts := func(d *Device, first, n int) *backend.Experts {
		e := &backend.Experts{First: first}
		for i := 0; i < n; i++ {
			g, _ := d.Upload(host[first+i][0])
			u, _ := d.Upload(host[first+i][1])
			dn, _ := d.Upload(host[first+i][2])
			e.Gate, e.Up, e.Down = append(e.Gate, g), append(e.Up, u), append(e.Down, dn)
		}
		return e
	}
	x := buf(randVec(r, T*E))
	top := ids{0, 3, 2, 0, 1, 2, 3, 1, 2, 3}
	w := buf(randVec(r, T*K))
	one := NewDevice(0, 1, 0)
	want := make(buf, T*E)
	one.MoE(want, x, T, top, w, experts(one, 0, X))
	sum := make(buf, T*E)
	for dv := 0; dv < 2; dv++ {
		d := NewDevice(dv, 1, 0)
		part := make(buf, T*E)
		d.MoE(part, x, T, top, w, experts(d, 2*dv, 2))
		Add(sum, part)
	}
	for i := range want {
		if math.Abs(float64(want[i]-sum[i])) > 1e-5 {
			t.Fatalf("value %d: split %g, one device %g", i, sum[i], want[i])
		}
	}
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		bits := math.Float32bits(x)
		b = append(b, byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24))
	}
	return b
}

// TestRead: Read copies every value, on the caller alone (small buffers,
// one worker) and in chunks on all the workers (large ones, whose last
// chunk is partial); a length mismatch panics.
func TestRead(t *testing.T) {
	for _, tc := range []struct{ workers, n int }{
		{1, parallelCopy + 5}, {2, 1000}, {2, parallelCopy - 1}, {2, parallelCopy}, {3, 3*copyChunk + 7}, {2, parallelCopy + copyChunk/2},
	} {
		t.Run(fmt.Sprintf("t%d/n%d", tc.workers, tc.n), func(t *testing.T) {
			d := NewDevice(0, tc.workers, 0)
			defer d.Close()
			src := make([]float32, tc.n)
			for i := range src {
				src[i] = float32(i) + 0.5
			}
			b, err := d.Alloc(tc.n)
			if err != nil {
				t.Fatal(err)
			}
			d.Write(b, src)
			dst := make([]float32, tc.n)
			d.Read(dst, b)
			for i := range dst {
				if dst[i] != src[i] {
					t.Fatalf("value %d: got %g, want %g", i, dst[i], src[i])
				}
			}
			defer func() {
				if recover() == nil {
					t.Error("Read into a shorter slice did not panic")
				}
			}()
			d.Read(dst[:tc.n-1], b)
		})
	}
}
