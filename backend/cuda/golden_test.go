package cuda

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"math/rand/v2"

	"github.com/ebitengine/purego"

	"github.com/glmrun/glmrun/backend"
	_ "github.com/glmrun/glmrun/backend/cpu" // the reference backend
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/tensor"
)

// goldenRef is the part of a llama.cpp reference run this test reads
// (testdata/README.shared.md section 4.3).
type goldenRef struct {
	Prompt       []int32 `json:"prompt"`
	PromptLogits []struct {
		Logits []float32 `json:"logits"`
	} `json:"prompt_logits"`
	Greedy []struct {
		ID   int32 `json:"id"`
		Next struct {
			Top [][]float64 `json:"top"`
		} `json:"next"`
	} `json:"greedy"`
}

// goldenTPs returns the tensor-parallel degrees to run: 1 and 2 on the
// fake driver (two fake devices); on GPUs 1 and every power of two up to
// $GLMRUN_CUDA_DEVICES or 4, whichever is more.
func goldenTPs(t *testing.T) []int {
	if !onGPU() {
		t.Setenv("FAKECUDA_DEVICES", "2")
		return []int{1, 2}
	}
	// 2 and 4 run on logical devices where there are fewer GPUs (Open).
	n, _ := strconv.Atoi(os.Getenv("GLMRUN_CUDA_DEVICES"))
	tps := []int{1}
	for tp := 2; tp <= max(n, 4); tp *= 2 {
		tps = append(tps, tp)
	}
	return tps
}

// TestGoldenForward runs whole golden models through the CUDA backend on
// the fake driver, every kernel executed by the CPU simulation of the .cu
// sources (or on GPUs with GLMRUN_CUDA=1), at tensor-parallel degree 1
// and more: the prompt's logits must match llama.cpp's f32-activation
// references within 1e-3 (testdata README) and the CPU backend within
// 1e-4; then a few greedy decode steps through the absorbed path. With
// the KV cache in f16 and bf16 the logits match the CPU backend's with the
// same cache (see the bound below).
func TestGoldenForward(t *testing.T) {
	const tolRef, tolCPU = 1e-3, 1e-4
	models := []string{"glm5-mini.Q8_0", "ds2-mini.Q8_0", "glm5-mini-sparse.Q8_0"}
	if onGPU() {
		models = append(models, "glm5-mini.Q4_K_M", "glm5-mini.Q6_K", "ds2-mini.Q4_K_M", "glm5-dense.Q8_0")
	}
	steps := 2
	if testing.Short() {
		models, steps = models[:1], 1
	}
	useFake(t)
	tps := goldenTPs(t)
	for _, name := range models {
		var ref goldenRef
		if err := json.Unmarshal(testmodels.Ref(t, name+".deq-F32.P1"), &ref); err != nil {
			t.Fatal(err)
		}
		path := testmodels.Path(t, name)
		run := func(t *testing.T, backendName string, tp int, cache tensor.Type) (prompt [][]float32, next [][]float32, ok bool) {
			s, err := openSession(t, path, model.Options{Backend: backendName, Threads: 1, TensorParallel: tp},
				model.SessionOptions{ContextSize: 64, CacheType: cache})
			if err != nil {
				if tp > 1 {
					t.Skipf("tp %d: %v", tp, err)
				}
				t.Fatal(err)
			}
			rows, err := s.Prefill(ref.Prompt)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < steps && k < len(ref.Greedy); k++ {
				row, err := s.Decode(ref.Greedy[k].ID)
				if err != nil {
					t.Fatal(err)
				}
				next = append(next, row)
			}
			return rows, next, true
		}
		var cp, cn [][]float32
		for _, tp := range tps {
			if tp > 1 && (testing.Short() || (!onGPU() && name != "glm5-mini.Q8_0")) {
				continue // keep the simulated run short: TP once
			}
			t.Run(name+"/tp"+strconv.Itoa(tp), func(t *testing.T) {
				if cp == nil {
					cp, cn, _ = run(t, "cpu", 1, tensor.F32)
				}
				gp, gn, _ := run(t, "cuda", tp, tensor.F32)
				var vsRef, vsCPU, greedy float64
				for i, row := range gp {
					vsRef = max(vsRef, testmodels.MaxAbsDiff(row, ref.PromptLogits[i].Logits))
					vsCPU = max(vsCPU, testmodels.MaxAbsDiff(row, cp[i]))
				}
				for k, row := range gn {
					vsCPU = max(vsCPU, testmodels.MaxAbsDiff(row, cn[k]))
					for _, top := range ref.Greedy[k].Next.Top {
						greedy = max(greedy, math.Abs(float64(row[int(top[0])])-top[1]))
					}
				}
				if vsRef > tolRef || greedy > tolRef {
					t.Errorf("CUDA vs llama.cpp: prompt logits %.3g, greedy top-5 %.3g > %g", vsRef, greedy, tolRef)
				}
				if vsCPU > tolCPU {
					t.Errorf("CUDA vs CPU backend: %.3g > %g", vsCPU, tolCPU)
				}
				t.Logf("%s tp %d: %d prompt tokens + %d decode steps: max abs logit diff vs llama.cpp %.3g (greedy top-5 %.3g), vs CPU backend %.3g",
					name, tp, len(ref.Prompt), len(gn), vsRef, greedy, vsCPU)
			})
		}
		// The KV cache in the other types. Rounding to the type amplifies
		// the float32 noise between the backends: a latent value within
		// that noise of a rounding boundary of f16 (or a Q8_0 step) lands
		// on the other side on one of them, a whole unit of the type's
		// rounding away. So the CUDA run with a cache type must agree with
		// the CPU run with the same type far better than the type's own
		// effect (the CPU's run with it against its float32-cache run, the
		// sum of every value's rounding): within a quarter of it. A CUDA
		// cache that stored float32, or rounded otherwise, differs by
		// about the whole effect.
		if testing.Short() || (!onGPU() && name != "glm5-mini-sparse.Q8_0") {
			continue
		}
		for _, cache := range []tensor.Type{tensor.F16, tensor.BF16} {
			t.Run(name+"/cache-"+cache.String(), func(t *testing.T) {
				if cp == nil { // the float32-cache CPU run, as the TP subtests made it
					cp, cn, _ = run(t, "cpu", 1, tensor.F32)
				}
				kp, kn, _ := run(t, "cpu", 1, cache) // the CPU with the same cache
				gp, gn, _ := run(t, "cuda", 1, cache)
				var vsCPU, effect float64
				for i, row := range gp {
					vsCPU = max(vsCPU, testmodels.MaxAbsDiff(row, kp[i]))
					effect = max(effect, testmodels.MaxAbsDiff(kp[i], cp[i]))
				}
				for k, row := range gn {
					vsCPU = max(vsCPU, testmodels.MaxAbsDiff(row, kn[k]))
					effect = max(effect, testmodels.MaxAbsDiff(kn[k], cn[k]))
				}
				if effect == 0 || vsCPU > effect/4 {
					t.Errorf("%s cache: CUDA vs CPU backend %.3g, the type's own effect on the CPU %.3g: want at most a quarter of it", cache, vsCPU, effect)
				}
				t.Logf("%s %s cache: max abs logit diff vs CPU backend %.3g (the type's effect: %.3g)", name, cache, vsCPU, effect)
			})
		}
	}
	if testing.Verbose() {
		t.Logf("simulated kernels (name, launches, seconds):\n%s", fakeStats(t))
	}
}

// TestGPUThroughput (GPU only) reports decode tokens/s on glm5-mini and
// the matrix-vector bandwidth on GLM-5-sized rows.
func TestGPUThroughput(t *testing.T) {
	if !onGPU() {
		t.Skip("GLMRUN_CUDA=1 only: timing the simulation means nothing")
	}
	for _, tp := range goldenTPs(t) {
		m, err := model.Load(testmodels.Path(t, "glm5-mini.Q8_0"), model.Options{Backend: "cuda", TensorParallel: tp})
		if err != nil {
			t.Logf("tp %d: %v", tp, err)
			continue
		}
		s, err := m.NewSession(model.SessionOptions{ContextSize: 512})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prefill([]int32{958, 959, 10, 20, 30}); err != nil {
			t.Fatal(err)
		}
		const steps = 128
		start := time.Now()
		tok := int32(40)
		for i := 0; i < steps; i++ {
			row, err := s.Decode(tok)
			if err != nil {
				t.Fatal(err)
			}
			tok = int32(argmax(row))
		}
		el := time.Since(start)
		t.Logf("glm5-mini.Q8_0 tp %d: decode %.1f tokens/s (%d steps, %v)", tp, steps/el.Seconds(), steps, el)
		s.Close()
		m.Close()
	}
	devs := openFake(t, backend.Config{Devices: 1})
	d := devs[0]
	p := &pair{t: t, g: d, r: rand.New(rand.NewPCG(1, 2))}
	for _, typ := range []tensor.Type{tensor.Q4_K, tensor.Q8_0, tensor.Q6_K} {
		const rows, cols = 6144, 6144
		w, err := d.Upload(p.randMatrix(typ, rows, cols))
		if err != nil {
			t.Fatal(err)
		}
		x, _ := d.UploadVector("x", p.vec(cols, 0, 1))
		y, _ := d.Alloc(rows)
		d.MatMul(y, x, 1, w)
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		const reps = 200
		start := time.Now()
		for i := 0; i < reps; i++ {
			d.MatMul(y, x, 1, w)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		t.Logf("MatMul %v %dx%d n=1: %.1f GB/s, %.1f µs per launch", typ, rows, cols,
			float64(w.Bytes())*reps/el.Seconds()/1e9, el.Seconds()/reps*1e6)
		d.Release(w)
		d.Free(x)
		d.Free(y)
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestLogicalDevices: tensor parallelism over more devices than GPUs runs
// on logical devices that share them (one fake GPU here): each has its own
// share of the GPU's memory and its name says which GPU it is on, and the
// logits equal those of the same split over as many GPUs, bit for bit,
// for TP 2 and 4.
func TestLogicalDevices(t *testing.T) {
	useFake(t)
	if onGPU() {
		t.Skip("the fake driver's GPU count is set here; on GPUs TestGoldenForward runs TP over logical devices")
	}
	path := testmodels.Path(t, "glm5-mini.Q8_0")
	var ref goldenRef
	if err := json.Unmarshal(testmodels.Ref(t, "glm5-mini.Q8_0.deq-F32.P1"), &ref); err != nil {
		t.Fatal(err)
	}
	logits := func(tp int) [][]float32 {
		s, err := openSession(t, path, model.Options{Backend: "cuda", Threads: 1, TensorParallel: tp},
			model.SessionOptions{ContextSize: 32})
		if err != nil {
			t.Fatalf("tp %d: %v", tp, err)
		}
		rows, err := s.Prefill(ref.Prompt)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	for _, tp := range []int{2, 4} {
		t.Setenv("FAKECUDA_DEVICES", strconv.Itoa(tp))
		want := logits(tp)
		t.Setenv("FAKECUDA_DEVICES", "1")
		devs := openFake(t, backend.Config{Devices: tp})
		if name := devs[tp-1].Name(); name != fmt.Sprintf("cuda:%d (on GPU 0)", tp-1) {
			t.Errorf("tp %d on one GPU: device %d is named %q", tp, tp-1, name)
		}
		if b, total := devs[0].Budget(), devs[0].g.total; b != int64(total)/int64(tp) {
			t.Errorf("tp %d on one GPU: a device's budget is %d of the GPU's %d", tp, b, total)
		}
		got := logits(tp)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("tp %d on one GPU: logits of token %d differ from tp %d on %d GPUs", tp, i, tp, tp)
			}
		}
	}
	t.Setenv("FAKECUDA_DEVICES", "2")
	if _, err := OpenDevices(backend.Config{Devices: 3}); !errors.Is(err, ErrNoDevice) {
		t.Errorf("3 devices on 2 GPUs: %v, want ErrNoDevice (not a multiple)", err)
	}
}

// TestDecodeStepCounters: what one decode step of a GLM-5-architecture
// model (glm-dsa: MLA, the DSA indexer, MoE) asks of the driver, counted
// by the fake: the step's only stream synchronisation is the final read
// of its logits, which is the only download (one row of V floats), and it
// uploads at most 1 KB (the token id). With -v it prints the figures as
// one line, "counters: launches=… syncs=… h2d_bytes=… d2h_bytes=…
// graph_replays=…". The step runs as one CUDA graph: the executable
// graph of the step before it, updated with this step's arguments.
func TestDecodeStepCounters(t *testing.T) {
	useFake(t)
	if onGPU() {
		t.Skip("counts the fake driver's calls")
	}
	const name = "glm5-mini-sparse.Q8_0"
	var ref goldenRef
	if err := json.Unmarshal(testmodels.Ref(t, name+".deq-F32.P1"), &ref); err != nil {
		t.Fatal(err)
	}
	s, err := openSession(t, testmodels.Path(t, name), model.Options{Backend: "cuda", Threads: 1},
		model.SessionOptions{ContextSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prefill(ref.Prompt); err != nil {
		t.Fatal(err)
	}
	// One step first, so that the step counted finds its scratch grown.
	if _, err := s.Decode(ref.Prompt[0]); err != nil {
		t.Fatal(err)
	}
	var counters func(*[5]int64)
	fakeFunc(t, "fake_counters", &counters)
	var before, after [5]int64
	fakeLog(t) // cleared
	counters(&before)
	row, err := s.Decode(ref.Prompt[1])
	if err != nil {
		t.Fatal(err)
	}
	counters(&after)
	log := fakeLog(t)
	var c [5]int64
	for i := range c {
		c[i] = after[i] - before[i]
	}
	launches, syncs, h2d, d2h, graphs := c[0], c[1], c[2], c[3], c[4]
	t.Logf("counters: launches=%d syncs=%d h2d_bytes=%d d2h_bytes=%d graph_replays=%d", launches, syncs, h2d, d2h, graphs)
	if want := int64(4 * len(row)); syncs != 1 || d2h != want || h2d > 1024 {
		t.Errorf("a decode step: %d synchronisations, %d bytes down, %d up; want 1 (the read of the logits), %d (one row of logits), at most 1024",
			syncs, d2h, h2d, want)
	}
	if launches == 0 {
		t.Error("no kernel launched")
	}
	if graphs != 1 || strings.Count(log, "cuGraphExecUpdate_v2 -> 0") != 1 || strings.Contains(log, "cuGraphInstantiate") {
		t.Errorf("a decode step after a decode step: %d graph launches, %d successful graph updates, %d instantiations; want 1, 1, 0",
			graphs, strings.Count(log, "cuGraphExecUpdate_v2 -> 0"), strings.Count(log, "cuGraphInstantiate"))
	}
}

// openSession loads the model at path with o and starts a session with so,
// both closed when t ends. A load error is returned (some callers skip a
// split the model does not divide); a session error fails t.
func openSession(t *testing.T, path string, o model.Options, so model.SessionOptions) (*model.Session, error) {
	t.Helper()
	m, err := model.Load(path, o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { m.Close() })
	s, err := m.NewSession(so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

// TestCollectives: tensor parallelism with the devices' all-reduce and
// broadcast device to device (p2p, the default) gives the logits of the
// host-staged collectives bit for bit, and a p2p all-reduce of three
// devices asks the driver for no synchronisation and no host copy: peer
// copies on the streams, ordered by events.
func TestCollectives(t *testing.T) {
	useFake(t)
	if onGPU() {
		t.Skip("sets the fake driver's GPU count and reads its counters")
	}
	t.Setenv("FAKECUDA_DEVICES", "2")
	const name = "glm5-mini.Q8_0"
	var ref goldenRef
	if err := json.Unmarshal(testmodels.Ref(t, name+".deq-F32.P1"), &ref); err != nil {
		t.Fatal(err)
	}
	logits := func(coll string) [][]float32 {
		s, err := openSession(t, testmodels.Path(t, name), model.Options{Backend: "cuda", Threads: 1, TensorParallel: 2, Collectives: coll},
			model.SessionOptions{ContextSize: 32})
		if err != nil {
			t.Fatalf("collectives %s: %v", coll, err)
		}
		rows, err := s.Prefill(ref.Prompt)
		if err != nil {
			t.Fatalf("collectives %s: %v", coll, err)
		}
		return rows
	}
	useFakeNCCL(t)
	host, p2p, nccl := logits("host"), logits("p2p"), logits("nccl")
	for i := range host {
		if !slices.Equal(host[i], p2p[i]) {
			t.Fatalf("token %d: p2p collectives' logits differ from the host's", i)
		}
		if !slices.Equal(host[i], nccl[i]) { // the fake NCCL adds in rank order
			t.Fatalf("token %d: NCCL collectives' logits differ from the host's", i)
		}
	}
	// NCCL takes one device a GPU: logical devices are refused by name.
	t.Setenv("FAKECUDA_DEVICES", "1")
	if _, _, err := Open(backend.Config{Devices: 2, Collectives: "nccl"}); err == nil || !strings.Contains(err.Error(), "shares GPU 0") {
		t.Errorf("NCCL over two logical devices on one GPU: %v", err)
	}
	t.Setenv("FAKECUDA_DEVICES", "2")

	t.Setenv("FAKECUDA_DEVICES", "3")
	for _, way := range []string{"p2p", "nccl"} {
		t.Run(way, func(t *testing.T) { allReduceCounters(t, way) })
	}
}

// allReduceCounters checks an all-reduce over three devices with the
// collectives way: the device-order sums, and no synchronisation or host
// copy (p2p: 4 peer copies; nccl: one NCCL collective).
func allReduceCounters(t *testing.T, way string) {
	devs, coll, err := Open(backend.Config{Devices: 3, Collectives: way})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	const n = 1000
	bufs := make([]backend.Buffer, 3)
	want := make([]float32, n)
	for i, d := range devs {
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(j%7) * 0.1 * float32(i+1)
			want[j] += v[j] // the device order's sums
		}
		if bufs[i], err = d.UploadVector("part", v); err != nil {
			t.Fatal(err)
		}
	}
	var counters func(*[5]int64)
	fakeFunc(t, "fake_counters", &counters)
	var ncclOps func() int64
	if way == "nccl" {
		lib, err := openLibrary(fakeNCCL.path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := librarySymbol(lib, "fake_nccl_ops")
		if err != nil {
			t.Fatal(err)
		}
		purego.RegisterFunc(&ncclOps, p)
	}
	var before, after [5]int64
	var opsBefore int64
	if ncclOps != nil {
		opsBefore = ncclOps()
	}
	fakeLog(t)
	counters(&before)
	if err := coll.AllReduce(bufs); err != nil {
		t.Fatal(err)
	}
	counters(&after)
	copies := strings.Count(fakeLog(t), "cuMemcpyPeerAsync")
	switch {
	case way == "p2p" && copies != 4:
		t.Errorf("%d peer copies for an all-reduce over 3 devices, want 4 (2 in, 2 out)", copies)
	case way == "nccl" && (copies != 0 || ncclOps()-opsBefore != 1):
		t.Errorf("%d peer copies and %d NCCL collectives for an NCCL all-reduce, want 0 and 1", copies, ncclOps()-opsBefore)
	}
	if syncs, h2d, d2h := after[1]-before[1], after[2]-before[2], after[3]-before[3]; syncs != 0 || h2d != 0 || d2h != 0 {
		t.Errorf("a p2p all-reduce: %d synchronisations, %d bytes up, %d down; want none", syncs, h2d, d2h)
	}
	got := make([]float32, n)
	for i, d := range devs {
		d.Read(got, bufs[i])
		if !slices.Equal(got, want) {
			t.Fatalf("device %d after the all-reduce: %v…, want %v…", i, got[:4], want[:4])
		}
	}
}
