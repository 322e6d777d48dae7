package cuda

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/backend"
)

// TestKernelsUnderTSan reruns TestKernels in a child process on a fake
// driver built with -fsanitize=thread whose simulation runs every CUDA
// thread as a pthread (FAKECUDA_THREADS=1), with libtsan preloaded: a
// kernel that reads shared memory another thread writes without a barrier
// between them is reported. A deliberately racy kernel checks that the
// harness does report races. The Go test binary is not instrumented:
// ignore_noninstrumented_modules keeps TSan from treating the Go runtime's
// own mmap calls as writes that later C reads of Go memory race with.
func TestKernelsUnderTSan(t *testing.T) {
	if testing.Short() || onGPU() {
		t.Skip("builds a ThreadSanitizer fake driver")
	}
	if os.Getenv("GLMRUN_TSAN_CHILD") == "1" {
		t.Skip("inside the ThreadSanitizer run")
	}
	useFake(t) // skips without a C compiler
	out, err := exec.Command("gcc", "-print-file-name=libtsan.so").Output()
	tsan := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(tsan, "/") {
		t.Skip("gcc has no libtsan")
	}
	lib, err := buildFakeFlags("tsan", "-fsanitize=thread", "-g")
	if err != nil {
		t.Fatalf("building the ThreadSanitizer fake driver: %v", err)
	}
	child := func(run string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", run, "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+tsan, "GLMRUN_FAKE_LIBCUDA="+lib, "FAKECUDA_THREADS=1",
			"GLMRUN_TSAN_CHILD=1", "TSAN_OPTIONS=exitcode=66 report_signal_unsafe=0 ignore_noninstrumented_modules=1")
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	got, err := child("^TestKernels$")
	if i := strings.Index(got, "ThreadSanitizer"); i >= 0 {
		t.Errorf("TestKernels under ThreadSanitizer:\n%s", got[max(0, i-200):min(len(got), i+3000)])
	} else if err != nil || !strings.Contains(got, "--- PASS: TestKernels") {
		t.Errorf("TestKernels under ThreadSanitizer: %v\n%s", err, tail(got, 60))
	}
	got, _ = child("^TestRacyKernel$")
	if !strings.Contains(got, "WARNING: ThreadSanitizer: data race") || !strings.Contains(got, "glm_sim_racy") {
		t.Errorf("the racy kernel was not reported:\n%s", tail(got, 30))
	}
}

// TestRacyKernel launches the simulation's deliberately racy kernel; it
// runs only as TestKernelsUnderTSan's child.
func TestRacyKernel(t *testing.T) {
	if os.Getenv("GLMRUN_TSAN_CHILD") != "1" {
		t.Skip("run by TestKernelsUnderTSan")
	}
	d := openFake(t, backend.Config{Devices: 1})[0]
	mod, err := d.g.loadModule([]byte(".version 7.8\n.target sm_80\n.visible .entry glm_sim_racy(\n\t.param .u64 out\n)\n{\n}\n"),
		[]string{"glm_sim_racy"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.Alloc(64)
	c := command{kind: cmdLaunch, dev: d, f: mod.funcs["glm_sim_racy"], grid: dim3{1, 1, 1}, block: dim3{64, 1, 1}}
	encodeArgs(&c, "glm_sim_racy", "p", []any{d.ptr(b)})
	d.g.launch(&c)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
