// Package testmodels finds glmrun's test models and reference data in the
// repository's testdata folder, and rebuilds the models that are not
// shipped as files but derived from shipped ones:
//
//   - glm5-mini-sparse.Q8_0: glm5-mini.Q8_0 with general.name
//     "glm5-mini-sparse" and glm-dsa.attention.indexer.top_k 8;
//   - glm5-mini-nextn.Q8_0: glm5-mini.Q8_0 patched with
//     testdata/models/glm5-mini-nextn.extra.gguf (made by mkextra).
//
// A derived model is built once per process into a cache directory
// (os.UserCacheDir()/glmrun-testdata, or tmp/glmrun-testdata in the
// repository), written to a temporary file and renamed so that test
// processes running in parallel can share it, and checked against the
// sha256 of the original in testdata/SHA256SUMS.shared.
package testmodels

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/glmrun/glmrun/gguf"
)

const module = "module github.com/glmrun/glmrun"

// root returns the repository root: the nearest directory above the
// working directory whose go.mod declares glmrun's module.
func root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte(module+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testmodels: no glmrun go.mod above the working directory")
		}
		dir = parent
	}
}

// Dir returns the absolute path of testdata/models in the repository.
func Dir(tb testing.TB) string {
	tb.Helper()
	r, err := root()
	if err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(r, "testdata", "models")
}

// Path returns the path of the model called name (the file name without
// .gguf, for example "glm5-mini.Q8_0" or "llama-dense.real.Q4_0"). Shipped
// models (testdata/models, testdata/formats) are returned directly; derived
// ones are rebuilt once into a cache and checked byte for byte.
func Path(tb testing.TB, name string) string {
	tb.Helper()
	p, err := path(name)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Ref returns the contents of testdata/refs/<name>.json, decompressed if it
// is shipped as .json.gz. name may include the .json suffix and
// subdirectories ("hidden/<run>/index").
func Ref(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := ref(name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func ref(name string) ([]byte, error) {
	r, err := root()
	if err != nil {
		return nil, err
	}
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".json")
	base := filepath.Join(r, "testdata", "refs", filepath.FromSlash(name)+".json")
	if b, err := os.ReadFile(base); err == nil {
		return b, nil
	}
	raw, err := os.ReadFile(base + ".gz")
	if err != nil {
		return nil, fmt.Errorf("testmodels: ref %q: %w", name, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("testmodels: ref %q: %w", name, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("testmodels: ref %q: %w", name, err)
	}
	return b, nil
}

// HF returns testdata/hf/<name>.json.gz decompressed: a reference of the
// Hugging Face test checkpoints ("glm5-hfs.P.batch",
// "glm5-hfs.llamacpp-bf16").
func HF(tb testing.TB, name string) []byte {
	tb.Helper()
	r, err := root()
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(r, "testdata", "hf", name+".json.gz"))
	if err != nil {
		tb.Fatalf("testmodels: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		tb.Fatalf("testmodels: %s: %v", name, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatalf("testmodels: %s: %v", name, err)
	}
	return b
}

// HFLogits are transformers' float32 logits for a prompt
// (testdata/hf/NAME.P.batch: all positions at once; NAME.P.seq: one token
// at a time through its cache); PromptLogits[i] follows Tokens[:i+1].
type HFLogits struct {
	Tokens       []int32 `json:"tokens"`
	PromptLogits []struct {
		Pos    int       `json:"pos"`
		Logits []float32 `json:"logits"`
	} `json:"prompt_logits"`
}

// ReadHFLogits decodes testdata/hf/<name>.json.gz as HFLogits.
func ReadHFLogits(tb testing.TB, name string) *HFLogits {
	tb.Helper()
	r := new(HFLogits)
	if err := json.Unmarshal(HF(tb, name), r); err != nil {
		tb.Fatalf("testmodels: %s: %v", name, err)
	}
	for i, p := range r.PromptLogits {
		if p.Pos != i {
			tb.Fatalf("testmodels: %s: entry %d is position %d", name, i, p.Pos)
		}
	}
	return r
}

// MaxAbsDiff returns the largest |a[i] − b[i]| in float64, or +Inf when
// the lengths differ: the distance the logit tests bound.
func MaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// recipe builds a derived model from files in testdata/models.
type recipe func(models string) (w *gguf.Writer, done func(), err error)

var recipes = map[string]recipe{
	"glm5-mini-sparse.Q8_0": func(models string) (*gguf.Writer, func(), error) {
		base, err := gguf.Open(filepath.Join(models, "glm5-mini.Q8_0.gguf"))
		if err != nil {
			return nil, nil, err
		}
		w, err := sparse(base)
		if err != nil {
			base.Close()
			return nil, nil, err
		}
		return w, func() { base.Close() }, nil
	},
	"glm5-mini-nextn.Q8_0": func(models string) (*gguf.Writer, func(), error) {
		return patchFrom(models, "glm5-mini.Q8_0", "glm5-mini-nextn.extra.gguf")
	},
}

// patchFrom opens base and extra in models and patches.
func patchFrom(models, baseName, extraFile string) (*gguf.Writer, func(), error) {
	base, err := gguf.Open(filepath.Join(models, baseName+".gguf"))
	if err != nil {
		return nil, nil, err
	}
	extra, err := gguf.Open(filepath.Join(models, extraFile))
	if err != nil {
		base.Close()
		return nil, nil, err
	}
	done := func() { base.Close(); extra.Close() }
	w, err := Patch(base, extra, baseName)
	if err != nil {
		done()
		return nil, nil, err
	}
	return w, done, nil
}

// build is the once-per-process state of one derived model.
type build struct {
	once sync.Once
	path string
	err  error
}

// builds holds one *build per derived model name: the only process-wide
// state, a cache of finished work.
var builds sync.Map

func path(name string) (string, error) {
	r, err := root()
	if err != nil {
		return "", err
	}
	for _, dir := range []string{"models", "formats"} {
		p := filepath.Join(r, "testdata", dir, name+".gguf")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	rec, ok := recipes[name]
	if !ok {
		return "", fmt.Errorf("testmodels: no model %q in testdata/models or testdata/formats, and no recipe for it", name)
	}
	v, _ := builds.LoadOrStore(name, new(build))
	b := v.(*build)
	b.once.Do(func() {
		dir, err := cacheDir(r)
		if err != nil {
			b.err = err
			return
		}
		b.path, b.err = derive(r, dir, name, rec)
	})
	return b.path, b.err
}

// cacheDir returns the directory for rebuilt models.
func cacheDir(repo string) (string, error) {
	if d, err := os.UserCacheDir(); err == nil {
		d = filepath.Join(d, "glmrun-testdata")
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d, nil
		}
	}
	d := filepath.Join(repo, "tmp", "glmrun-testdata")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("testmodels: %w", err)
	}
	return d, nil
}

// derive returns the file of a derived model in the cache directory dir,
// building it if the cache lacks it or holds a wrong one.
func derive(repo, dir, name string, rec recipe) (string, error) {
	want, err := sharedSum(repo, "models/"+name+".gguf")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name+"-"+want[:16]+".gguf")
	if got, err := fileSum(p); err == nil && got == want {
		return p, nil
	}
	w, done, err := rec(filepath.Join(repo, "testdata", "models"))
	if err != nil {
		return "", fmt.Errorf("testmodels: build %s: %w", name, err)
	}
	defer done()
	tmp, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return "", fmt.Errorf("testmodels: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, h), 1<<20)
	_, err = w.WriteTo(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("testmodels: build %s: %w", name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return "", fmt.Errorf("testmodels: rebuilt %s has sha256 %s, SHA256SUMS.shared says %s", name, got, want)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", fmt.Errorf("testmodels: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("testmodels: %w", err)
	}
	return p, nil
}

// sharedSum returns the sha256 that testdata/SHA256SUMS.shared lists for
// rel (a path under the shared testdata, such as models/x.gguf).
func sharedSum(repo, rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(repo, "testdata", "SHA256SUMS.shared"))
	if err != nil {
		return "", fmt.Errorf("testmodels: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		sum, file, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if ok && strings.TrimPrefix(file, "./") == rel && len(sum) == 64 {
			return sum, nil
		}
	}
	return "", fmt.Errorf("testmodels: SHA256SUMS.shared has no entry for %s", rel)
}

func fileSum(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
