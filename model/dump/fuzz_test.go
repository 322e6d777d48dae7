package dump

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary index.json files (next to a few small data
// files) to Open and Read: they must return errors, never panic or
// allocate more than the files hold.
func FuzzOpen(f *testing.F) {
	seeds := []string{
		`{"model":"m","tokens":[1,2],"tensors":[{"name":"embd","layer":-1,"shape":[2,2],"file":"a.npy"}]}`,
		`{"model":"m","tokens":[1],"tensors":[{"name":"x","layer":0,"shape":[1,3],"file":"a.npy","dtype":"i32"}]}`,
		`{"prompt":[1,2],"layout":"raw","tensors":[{"name":"l_out-0","occ":0,"file":"b.f32","dtype":"f32","ne":[2,2,1,1],"n":4}]}`,
		`{"prompt":[1],"tensors":[{"name":"top_k-1","occ":2,"file":"b.f32","dtype":"i32","ne":[4,1]}]}`,
		`{"prompt":[1],"tensors":[{"name":"x","file":"b.f32","ne":[1099511627776,1099511627776]}]}`,
		`{"tensors":[{"name":"x","shape":[-1],"file":"a.npy"}]}`,
		`{"tensors":[{"name":"x","shape":[4],"file":"../b.f32"}]}`,
		`[]`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	w, err := Create(dir, Info{})
	if err != nil {
		f.Fatal(err)
	}
	w.Hook("a", -1, []int{2, 2}, []float32{1, 2, 3, 4})
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.f32"), f32Bytes(1, 2, 3, 4), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, index []byte) {
		sub := t.TempDir()
		for _, name := range []string{"a.npy", "b.f32"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sub, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, IndexFile), index, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := Open(sub)
		if err != nil {
			return
		}
		for i := range d.Tensors {
			if tn, err := d.Read(&d.Tensors[i]); err == nil {
				CompareTensors(d.Tensors[i].Name, tn, tn, DefaultTolerance)
			}
		}
	})
}
