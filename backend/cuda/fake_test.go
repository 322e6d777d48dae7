package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The fake driver (testdata/fakecuda.c + the CPU simulation of the
// kernels, testdata/sim.cc) is built once per test binary.
var fake struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fake.dir != "" {
		os.RemoveAll(fake.dir)
	}
	os.Exit(code)
}

// buildFake compiles the fake libcuda.so.1 with gcc/g++.
func buildFake() (string, error) { return buildFakeFlags("fake") }

// buildFakeFlags compiles a fake libcuda.so.1 into a subdirectory name of
// the test's temporary directory with extra compiler flags.
func buildFakeFlags(name string, flags ...string) (string, error) {
	for _, tool := range []string{"gcc", "g++"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%s not found: %w", tool, err)
		}
	}
	if fake.dir == "" {
		dir, err := os.MkdirTemp("", "glmrun-fakecuda-")
		if err != nil {
			return "", err
		}
		fake.dir = dir
	}
	dir := filepath.Join(fake.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "libcuda.so.1")
	cc := append([]string{"gcc", "-O2", "-fPIC", "-Wall"}, flags...)
	cxx := append([]string{"g++", "-std=c++20", "-O2", "-fPIC", "-Wall"}, flags...)
	ld := append([]string{"g++", "-shared"}, flags...)
	steps := [][]string{
		append(cc, "-c", "testdata/fakecuda.c", "-o", filepath.Join(dir, "fakecuda.o")),
		append(cxx, "-c", "testdata/sim.cc", "-o", filepath.Join(dir, "sim.o")),
		append(ld, "-o", out, filepath.Join(dir, "fakecuda.o"), filepath.Join(dir, "sim.o"), "-lpthread"),
	}
	for _, s := range steps {
		if b, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%v: %v\n%s", s, err, b)
		}
	}
	return out, nil
}

// useFakeNCCL points GLMRUN_LIBNCCL at a fake libnccl.so.2
// (testdata/fakenccl.c) for the test, built once, or skips the test
// without a C compiler.
func useFakeNCCL(t testing.TB) string {
	t.Helper()
	fakeNCCL.once.Do(func() {
		if _, err := exec.LookPath("gcc"); err != nil {
			fakeNCCL.err = err
			return
		}
		if fake.dir == "" {
			if fake.dir, fakeNCCL.err = os.MkdirTemp("", "glmrun-fakecuda-"); fakeNCCL.err != nil {
				return
			}
		}
		dir := filepath.Join(fake.dir, "nccl")
		if fakeNCCL.err = os.MkdirAll(dir, 0o755); fakeNCCL.err != nil {
			return
		}
		fakeNCCL.path = filepath.Join(dir, "libnccl.so.2")
		if b, err := exec.Command("gcc", "-O2", "-fPIC", "-Wall", "-shared", "-o", fakeNCCL.path, "testdata/fakenccl.c", "-lpthread").CombinedOutput(); err != nil {
			fakeNCCL.err = fmt.Errorf("%v\n%s", err, b)
		}
	})
	if fakeNCCL.err != nil {
		t.Skipf("no fake NCCL: %v", fakeNCCL.err)
	}
	t.Setenv("GLMRUN_LIBNCCL", fakeNCCL.path)
	return fakeNCCL.path
}

var fakeNCCL struct {
	once sync.Once
	path string
	err  error
}

// onGPU reports whether the tests run on the real driver: GLMRUN_CUDA=1
// (scripts/gpu-check.sh sets it on a GPU machine). Otherwise they run on
// the fake driver.
func onGPU() bool { return os.Getenv("GLMRUN_CUDA") == "1" }

// useFake points GLMRUN_LIBCUDA at the fake driver for the test, or
// skips the test without a C compiler. With GLMRUN_CUDA=1 it leaves the
// real driver in place and returns "".
func useFake(t testing.TB) string {
	t.Helper()
	if onGPU() {
		return ""
	}
	if p := os.Getenv("GLMRUN_FAKE_LIBCUDA"); p != "" { // a prebuilt fake (the race test's child)
		fake.path = p
		t.Setenv("GLMRUN_LIBCUDA", p)
		return p
	}
	fake.once.Do(func() { fake.path, fake.err = buildFake() })
	if fake.err != nil {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Skipf("no C compiler for the fake driver: %v", fake.err)
		}
		t.Fatalf("building the fake driver: %v", fake.err)
	}
	t.Setenv("GLMRUN_LIBCUDA", fake.path)
	return fake.path
}

// fakeLog returns the fake driver's call log and clears it.
func fakeLog(t testing.TB) string {
	t.Helper()
	if onGPU() {
		t.Skip("inspects the fake driver's log")
	}
	var logFn func() uintptr
	var reset func()
	fakeFunc(t, "fake_log", &logFn)
	fakeFunc(t, "fake_log_reset", &reset)
	p := logFn()
	// The log is up to a megabyte: longer than cString reads.
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(nil), p+uintptr(n))) != 0 { //nolint:govet // C memory of the fake
		n++
	}
	s := string(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), p)), n)) //nolint:govet // C memory of the fake
	reset()
	return s
}

// fakeStats returns the fake driver's per-kernel launch counts and
// simulated seconds.
func fakeStats(t testing.TB) string {
	t.Helper()
	if onGPU() {
		return "(real driver)"
	}
	var stats func() uintptr
	fakeFunc(t, "fake_stats", &stats)
	return cString(stats())
}

// fakeFunc binds fn to the fake driver's test function name.
func fakeFunc(t testing.TB, name string, fn any) {
	t.Helper()
	lib, err := openLibrary(fake.path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := librarySymbol(lib, name)
	if err != nil {
		t.Fatal(err)
	}
	purego.RegisterFunc(fn, p)
}
