package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/internal/mmap"
	"github.com/glmrun/glmrun/tensor"
)

// TestRepackedMatMul checks the products of repacked weights against the
// same weights in the file's layout: within float rounding of them (the
// packed kernels add the same integers and round their float steps in
// another order), every token's result the same bits whatever the number
// of tokens in the product, the memory counted at the repacked size, and
// row slices that break the groups of eight read the rows' own layout. An
// output head (Matrix.Head) is repacked wherever the CPU has the layout's
// single-token kernel (tensor.HeadPackedGemm), the same way.
func TestRepackedMatMul(t *testing.T) {
	const rows, cols, n = 40, 512, 11
	for _, tc := range []struct {
		typ  tensor.Type
		head bool
	}{{tensor.Q4_K, false}, {tensor.Q6_K, false}, {tensor.Q8_0, false}, {tensor.Q5_0, false}, {tensor.Q4_K, true}, {tensor.Q6_K, true}} {
		typ := tc.typ
		packedGemm, packedSize, name := tensor.PackedGemm, tensor.PackedSize, typ.String()
		if tc.head {
			packedGemm, packedSize, name = tensor.HeadPackedGemm, tensor.HeadPackedSize, name+"/head"
		}
		if _, ok := packedGemm(typ); !ok {
			t.Logf("%s: not repacked on this CPU", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, uint64(typ)))
			w := randVec(r, rows*cols)
			m := quantMatrix(t, typ, w, rows, cols)
			m.Head = tc.head
			x := randVec(r, n*cols)
			plain, packed := NewFastDevice(0, 2, 0), NewFastDevice(0, 2, 0)
			packed.cpu.SetRepack(true)
			wp, err := plain.Upload(m)
			if err != nil {
				t.Fatal(err)
			}
			wq, err := packed.Upload(m)
			if err != nil {
				t.Fatal(err)
			}
			size, _ := packedSize(typ, rows, cols)
			if Mat(wq).Packed == nil || wq.Bytes() != size || packed.Used() != size || packed.RepackedBytes() != size {
				t.Fatalf("repacked weight: %d bytes, device uses %d, repacked %d; want %d", wq.Bytes(), packed.Used(), packed.RepackedBytes(), size)
			}
			if Mat(wp).Packed != nil || plain.RepackedBytes() != 0 {
				t.Fatal("a device without SetRepack repacked")
			}
			want := make([]float32, n*rows)
			plain.cpu.MatMul(want, x, n, Mat(wp))
			got := make([]float32, n*rows)
			packed.cpu.MatMul(got, x, n, Mat(wq))
			deq := make([]float32, rows*cols)
			Dequantize(deq, m)
			for j := range n {
				one := make([]float32, rows)
				packed.cpu.MatMul(one, x[j*cols:(j+1)*cols], 1, Mat(wq))
				for i := range rows {
					// |packed − row-major| within float32 rounding of the
					// terms' magnitude, a few hundred of them per output.
					var mag float64
					for k := range cols {
						mag += math.Abs(float64(deq[i*cols+k]) * float64(x[j*cols+k]))
					}
					g, wnt := got[j*rows+i], want[j*rows+i]
					if math.Abs(float64(g-wnt)) > 64*0x1p-24*mag {
						t.Errorf("token %d row %d: repacked %g, file layout %g (magnitude %g)", j, i, g, wnt, mag)
					}
					if math.Float32bits(one[i]) != math.Float32bits(g) {
						t.Errorf("token %d row %d: %g alone, %g among %d tokens", j, i, one[i], g, n)
					}
				}
			}
			for _, s := range []struct{ row, n int }{{8, 16}, {4, 12}, {0, 7}} {
				sp, sq := Mat(wp).Slice(s.row, s.n), Mat(wq).Slice(s.row, s.n)
				if aligned := s.row%8 == 0 && s.n%8 == 0; (sq.Packed != nil) != aligned {
					t.Fatalf("rows [%d, %d): packed %v, want %v", s.row, s.row+s.n, sq.Packed != nil, aligned)
				}
				a, b := make([]float32, n*s.n), make([]float32, n*s.n)
				plain.cpu.MatMul(a, x, n, sp)
				packed.cpu.MatMul(b, x, n, sq)
				for j := range n {
					for i := range s.n {
						if sq.Packed != nil {
							if g := got[j*rows+s.row+i]; math.Float32bits(b[j*s.n+i]) != math.Float32bits(g) {
								t.Fatalf("rows [%d, %d) token %d row %d: %g, whole matrix %g", s.row, s.row+s.n, j, i, b[j*s.n+i], g)
							}
						} else if math.Float32bits(a[j*s.n+i]) != math.Float32bits(b[j*s.n+i]) {
							t.Fatalf("rows [%d, %d) token %d row %d: %g, file layout %g", s.row, s.row+s.n, j, i, b[j*s.n+i], a[j*s.n+i])
						}
					}
				}
			}
		})
	}
}

// TestRepackedMappedMemory: repacked copies of packedArenaMinBytes or more
// live in the device's mapped memory (chunks aligned for huge pages on
// Unix, each copy on 64 bytes, copies of a chunk's quarter or more in a
// mapping of their own), compute what the same copy on the Go heap
// computes, bit for bit, and Close releases them.
func TestRepackedMappedMemory(t *testing.T) {
	if _, ok := tensor.PackedGemm(tensor.Q8_0); !ok {
		t.Skip("no packed product on this CPU")
	}
	const cols, n = 1024, 3
	r := rand.New(rand.NewPCG(7, 8))
	d := NewFastDevice(0, 2, 0)
	d.cpu.SetRepack(true)
	d.arenaChunk = 4 << 20 // copies over 1 MB have their own mapping
	for _, tc := range []struct {
		rows    int
		mapped  int  // mappings the device holds after the upload
		chunked bool // the copy starts a chunk or a mapping of its own
	}{
		{8, 0, false},   // 9 KB: the Go heap
		{256, 1, true},  // 278 KB: the first chunk
		{512, 1, false}, // 557 KB: after it in the same chunk
		{2000, 2, true}, // 2.2 MB: a mapping of its own
		{800, 2, false}, // back in the first chunk
		{904, 2, false}, // 984 KB, to 2.7 MB of the chunk
		{904, 2, false}, // to 3.7 MB
		{904, 3, true},  // does not fit the rest: a new chunk
	} {
		m := quantMatrix(t, tensor.Q8_0, randVec(r, tc.rows*cols), tc.rows, cols)
		size, _ := tensor.PackedSize(tensor.Q8_0, tc.rows, cols)
		w, err := d.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		packed := Mat(w).Packed
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(packed)))
		// Windows aligns its mappings to 64 KB only, so there the start of
		// a chunk cannot be told from the address.
		chunked := addr%mmap.HugePageAlign == 0 || runtime.GOOS == "windows" && tc.chunked
		if len(packed) != int(size) || addr%64 != 0 || len(d.mapped) != tc.mapped || chunked != tc.chunked {
			t.Fatalf("%d rows: %d bytes at %#x, %d mappings; want %d bytes on 64 bytes, %d mappings, starting a chunk %v",
				tc.rows, len(packed), addr, len(d.mapped), size, tc.mapped, tc.chunked)
		}
		heap, err := withPacked(m, make([]byte, size))
		if err != nil {
			t.Fatal(err)
		}
		x := randVec(r, n*cols)
		got, want := make([]float32, n*tc.rows), make([]float32, n*tc.rows)
		d.cpu.MatMul(got, x, n, Mat(w))
		d.cpu.MatMul(want, x, n, heap)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%d rows, output %d: %g from mapped memory, %g from the heap", tc.rows, i, got[i], want[i])
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if len(d.mapped) != 0 || d.RepackedBytes() != 0 {
		t.Errorf("after Close: %d mappings, %d bytes repacked", len(d.mapped), d.RepackedBytes())
	}
}

// TestRepackChoice checks which weights a device repacks: not a lookup
// table, not a shape that breaks the groups or a type without packed
// kernels, and nothing on a batch-invariant or --no-repack device.
func TestRepackChoice(t *testing.T) {
	if _, ok := tensor.PackedGemm(tensor.Q8_0); !ok {
		t.Skip("no packed product on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	q8 := quantMatrix(t, tensor.Q8_0, randVec(r, 16*64), 16, 64)
	lookup := q8
	lookup.LookupOnly = true
	odd := quantMatrix(t, tensor.Q8_0, randVec(r, 12*64), 12, 64)
	f16 := quantMatrix(t, tensor.F16, randVec(r, 16*64), 16, 64)
	for _, tc := range []struct {
		name string
		cfg  backend.Config
		m    backend.Matrix
		want bool
	}{
		{"fast", backend.Config{Devices: 1, Fast: true}, q8, true},
		{"lookup table", backend.Config{Devices: 1, Fast: true}, lookup, false},
		{"12 rows", backend.Config{Devices: 1, Fast: true}, odd, false},
		{"F16", backend.Config{Devices: 1, Fast: true}, f16, false},
		{"no-repack", backend.Config{Devices: 1, Fast: true, NoRepack: true}, q8, false},
		{"batch-invariant", backend.Config{Devices: 1, Fast: true, BatchInvariant: true}, q8, false},
		{"exact", backend.Config{Devices: 1}, q8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs, _, err := Open(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer devs[0].Close()
			w, err := devs[0].Upload(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got := Mat(w).Packed != nil; got != tc.want {
				t.Errorf("repacked %v, want %v", got, tc.want)
			}
			if got := devs[0].(*Device).RepackedBytes() > 0; got != tc.want {
				t.Errorf("RepackedBytes %d", devs[0].(*Device).RepackedBytes())
			}
		})
	}
}

// BenchmarkRepack measures repacking a GLM-4.7-Flash expert stack as a
// model load does.
func BenchmarkRepack(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []tensor.Type{tensor.Q4_K, tensor.Q8_0} {
		if _, ok := tensor.PackedGemm(typ); !ok {
			continue
		}
		const rows, cols = 1536 * 8, 2048
		m := quantMatrix(b, typ, randVec(r, rows*cols), rows, cols)
		size, _ := tensor.PackedSize(typ, rows, cols)
		dst := make([]byte, size)
		b.Run(fmt.Sprint(typ), func(b *testing.B) {
			b.SetBytes(int64(len(m.Data)))
			for b.Loop() {
				if err := tensor.Repack(typ, dst, m.Data, rows, cols); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
