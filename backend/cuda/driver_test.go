package cuda

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/glmrun/glmrun/backend"
)

// TestNoDriver: a missing library or one without the driver API gives
// ErrNoDriver with the reason, never a crash.
func TestNoDriver(t *testing.T) {
	libc := "libc.so.6"
	for _, tc := range []struct{ name, path, want string }{
		{"missing", "/nonexistent/libcuda.so.1", "cannot open"},
		{"not a driver", libc, "lacks cuGetErrorName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GLMRUN_LIBCUDA", tc.path)
			_, _, err := backend.Open("cuda", backend.Config{Devices: 1})
			if !errors.Is(err, ErrNoDriver) {
				t.Fatalf("Open: %v, want ErrNoDriver", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "cuda: no CUDA driver: ") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q, want the no-driver prefix and %q", msg, tc.want)
			}
		})
	}
}

// TestNoDevice: a driver whose cuInit reports no device, or fewer devices
// than requested, gives ErrNoDevice.
func TestNoDevice(t *testing.T) {
	skipOnGPU(t)
	useFake(t)
	t.Setenv("FAKECUDA_DEVICES", "0")
	_, _, err := backend.Open("cuda", backend.Config{Devices: 1})
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "CUDA_ERROR_NO_DEVICE (100)") {
		t.Errorf("no device: %v", err)
	}
	t.Setenv("FAKECUDA_DEVICES", "2")
	_, _, err = backend.Open("cuda", backend.Config{Devices: 3})
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "3 requested, 2 present") {
		t.Errorf("too few devices: %v", err)
	}
}

func openFake(t *testing.T, c backend.Config) []*Device {
	t.Helper()
	useFake(t)
	devs, err := OpenDevices(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range devs {
			if err := d.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	return devs
}

// TestOpenAndLaunch: opening loads the module (every kernel found), a
// launch reaches the driver with the PTX parameter sizes, and data make
// the round trip host → device → kernel → host exactly.
func TestOpenAndLaunch(t *testing.T) {
	start := time.Now()
	d := openFake(t, backend.Config{Devices: 1})[0]
	t.Logf("open and module load (JIT): %v", time.Since(start))
	t.Logf("%s: %s, compute capability %d.%d", d.Name(), d.DeviceName(), d.g.major, d.g.minor)
	if onGPU() {
		t.Logf("JIT info log: %s", d.mod.infoLog)
	} else if major, minor := d.ComputeCapability(); major != 9 || minor != 0 {
		t.Errorf("compute capability %d.%d, fake says 9.0", major, minor)
	}
	if d.Name() != "cuda:0" || (!onGPU() && !strings.Contains(d.DeviceName(), "fake")) {
		t.Errorf("names %q %q", d.Name(), d.DeviceName())
	}
	if !onGPU() {
		fakeLog(t)
	}
	x, _ := d.Alloc(1000)
	y, _ := d.Alloc(1000)
	a, b := make([]float32, 1000), make([]float32, 1000)
	for i := range a {
		a[i], b[i] = float32(i), float32(2*i)+0.5
	}
	d.Write(x, a)
	d.Write(y, b)
	d.Add(y, x)
	got := make([]float32, 1000)
	d.Read(got, y)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != a[i]+b[i] {
			t.Fatalf("y[%d] = %g, want %g", i, got[i], a[i]+b[i])
		}
	}
	if onGPU() {
		return
	}
	log := fakeLog(t)
	re := regexp.MustCompile(`launch add_f32 grid=4,1,1 block=256,1,1 shared=0 args=\[8:0x[0-9a-f]+ 8:0x[0-9a-f]+ 4:0x3e8\] -> 0`)
	if !re.MatchString(log) {
		t.Errorf("launch not logged as expected:\n%s", log)
	}
	d.Free(x)
	d.Free(y)
	if d.Used() != int64(d.scratchBytes()) {
		t.Errorf("Used %d after freeing everything (scratch %d)", d.Used(), d.scratchBytes())
	}
}

func (d *Device) scratchBytes() int64 {
	var n int64
	for _, m := range d.scratch {
		n += m.bytes
	}
	return n
}

// TestBudget: the per-device budget refuses allocations that do not fit
// (a plain error at once), and the driver's own out-of-memory error names
// the call and the CUDA error.
func TestBudget(t *testing.T) {
	skipOnGPU(t)
	t.Run("budget", func(t *testing.T) {
		d := openFake(t, backend.Config{Devices: 1, Memory: 4096})[0]
		b, err := d.Alloc(1000)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Alloc(100); err == nil || !strings.Contains(err.Error(), "do not fit: 4000 of 4096 bytes in use") {
			t.Errorf("over budget: %v", err)
		}
		d.Free(b)
		if _, err := d.Alloc(1024); err != nil {
			t.Errorf("after Free: %v", err)
		}
	})
	t.Run("driver", func(t *testing.T) {
		t.Setenv("FAKECUDA_MEM", "65536")
		d := openFake(t, backend.Config{Devices: 1, Memory: 1 << 30})[0]
		_, err := d.Alloc(1 << 20)
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != 2 ||
			!strings.Contains(err.Error(), "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory") {
			t.Errorf("driver OOM: %v", err)
		}
	})
}

// TestJITError: a module the JIT rejects returns the driver's error with
// the JIT error log.
func TestJITError(t *testing.T) {
	skipOnGPU(t)
	d := openFake(t, backend.Config{Devices: 1})[0]
	_, err := d.g.loadModule([]byte(".version 7.8\n.target sm_80\n// glmrun_fake_jit_error\n"), nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_INVALID_PTX" || !strings.Contains(ce.Log, "fake JIT failure") {
		t.Fatalf("JIT error: %v", err)
	}
	if !strings.Contains(err.Error(), "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218)") {
		t.Errorf("message %q", err)
	}
	if _, err := d.g.loadModule(ptxSource, []string{"no_such_kernel"}); err == nil ||
		!strings.Contains(err.Error(), "kernel no_such_kernel: cuda: cuModuleGetFunction: CUDA_ERROR_NOT_FOUND (500)") {
		t.Errorf("missing kernel: %v", err)
	}
}

// TestStickyFault: a failing launch is reported by Sync, and later work is
// skipped rather than run on bad state.
func TestStickyFault(t *testing.T) {
	skipOnGPU(t)
	useFake(t)
	devs, err := OpenDevices(backend.Config{Devices: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := devs[0]
	defer func() {
		if err := d.Close(); err == nil {
			t.Error("Close after a fault returned nil")
		}
	}()
	x, _ := d.Alloc(64)
	d.run("fill_f32", dim3{1, 1, 1}, dim3{2048, 1, 1}, 0, d.ptr(x), float32(1), int32(64)) // block too large
	if err := d.Sync(); err == nil || !strings.Contains(err.Error(), "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1)") {
		t.Fatalf("Sync after a bad launch: %v", err)
	}
	got := make([]float32, 64)
	d.Read(got, x)
	if got[0] == got[0] { // NaN after a fault
		t.Errorf("Read after a fault gave %g, want NaN", got[0])
	}
}

// TestCGOFree: the package builds without cgo.
func TestCGOFree(t *testing.T) {
	if testing.Short() || onGPU() {
		t.Skip("builds the package")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", "build", "-o", "/dev/null", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}

// skipOnGPU skips tests that need the fake driver's knobs.
func skipOnGPU(t *testing.T) {
	if onGPU() {
		t.Skip("needs the fake driver")
	}
}

// TestQueuedLaunches: launches and small uploads are queued by value. The
// issuing goroutine neither allocates nor waits for the GPU's thread:
// with that thread held by a call, a hundred launches (counted for
// allocations), a hundred more and an upload return, and run in order
// once it is released.
func TestQueuedLaunches(t *testing.T) {
	d := openFake(t, backend.Config{Devices: 1})[0]
	x, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	p := d.ptr(x)
	held, release := make(chan struct{}), make(chan struct{})
	go d.g.do(func() error {
		close(held)
		<-release
		return nil
	})
	<-held
	// Measured while the GPU's thread is held: AllocsPerRun counts every
	// goroutine's allocations, and that thread's driver calls through
	// purego allocate.
	if allocs := testing.AllocsPerRun(100, func() {
		d.run("fill_f32", dim3{1, 1, 1}, dim3{64, 1, 1}, 0, p, float32(1), int32(64))
	}); allocs != 0 {
		t.Errorf("a launch allocates %v times", allocs)
	}
	issued := make(chan struct{})
	ones := make([]float32, 64)
	for i := range ones {
		ones[i] = 1
	}
	go func() {
		for i := range 100 {
			d.run("fill_f32", dim3{1, 1, 1}, dim3{64, 1, 1}, 0, p, float32(i), int32(64))
		}
		d.Write(x.Slice(0, 8), ones[:8]) // 32 bytes: queued in the command
		d.run("scale_f32", dim3{1, 1, 1}, dim3{64, 1, 1}, 0, p, float32(2), int32(64))
		close(issued)
	}()
	select {
	case <-issued:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the launches waited for the GPU's thread")
	}
	close(release)
	got := make([]float32, 64)
	d.Read(got, x)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := float32(2 * 99)
		if i < 8 {
			want = 2
		}
		if v != want {
			t.Fatalf("value %d = %g after the queued work, want %g", i, v, want)
		}
	}
}

// TestGraphs: the work queued between two reads runs as one CUDA graph
// (its upload from pinned staging memory); a later segment of the same
// kernels in the same order updates the executable graph with its own
// arguments, one of other kernels instantiates a new one. The values are
// those of launching one at a time: with graphs turned off
// (GLMRUN_CUDA_GRAPHS=0) and when the driver's capture fails, where the
// segment's commands run one by one and graphs stay off.
func TestGraphs(t *testing.T) {
	skipOnGPU(t)
	for _, tc := range []struct {
		name, env, val              string
		replays, instances, updates int
	}{
		{"graphs", "", "", 4, 2, 2},
		{"off", "GLMRUN_CUDA_GRAPHS", "0", 0, 0, 0},
		{"capture fails", "FAKECUDA_CAPTURE_FAIL", "1", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, tc.val)
			}
			d := openFake(t, backend.Config{Devices: 1})[0]
			var counters func(*[5]int64)
			fakeFunc(t, "fake_counters", &counters)
			x, err := d.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			p := d.ptr(x)
			var before, after [5]int64
			fakeLog(t)
			counters(&before)
			got, vals := make([]float32, 64), make([]float32, 8)
			for k := range 4 {
				for i := range vals {
					vals[i] = float32(10 + k)
				}
				d.run("fill_f32", dim3{1, 1, 1}, dim3{64, 1, 1}, 0, p, float32(k), int32(64))
				if k < 3 {
					d.Write(x.Slice(0, 8), vals)
				} else { // other kernels: a new graph
					d.run("scale_f32", dim3{1, 1, 1}, dim3{64, 1, 1}, 0, p, float32(5), int32(64))
				}
				d.run("scale_f32", dim3{1, 1, 1}, dim3{64, 1, 1}, 0, p, float32(2), int32(64))
				d.Read(got, x)
				for i, v := range got {
					want := float32(2 * k)
					if k == 3 {
						want = float32(2 * 5 * k)
					} else if i < 8 {
						want = float32(2 * (10 + k))
					}
					if v != want {
						t.Fatalf("segment %d: value %d = %g, want %g", k, i, v, want)
					}
				}
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			counters(&after)
			log := fakeLog(t)
			replays := after[4] - before[4]
			instances := strings.Count(log, "cuGraphInstantiateWithFlags")
			updates := strings.Count(log, "cuGraphExecUpdate_v2 -> 0")
			if replays != int64(tc.replays) || instances != tc.instances || updates != tc.updates {
				t.Errorf("%d graph launches, %d instantiations, %d updates; want %d, %d, %d",
					replays, instances, updates, tc.replays, tc.instances, tc.updates)
			}
		})
	}
}
