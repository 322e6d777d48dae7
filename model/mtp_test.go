package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model/sample"
)

// mtpRef is tools/train/mtp_ref.py's output: PyTorch's trunk and MTP logits
// on the dequantized weights of a GGUF.
type mtpRef struct {
	GGUF string  `json:"gguf"`
	IDs  []int32 `json:"ids"`
	Rows []struct {
		Pos    int         `json:"pos"`
		Trunk  []float32   `json:"trunk"`
		MTP    [][]float32 `json:"mtp"`
		Drafts []int32     `json:"drafts"`
		// DSAMargin is, per MTP row, the gap between the block's
		// top_k-th and next indexer score relative to the scores' size
		// (null when the row sees at most top_k keys).
		DSAMargin []*float64 `json:"dsa_margin"`
	} `json:"rows"`
}

// mtpTolerance is the bar for the MTP head against an independent
// reference; with float32 activations both sides compute the same sums in
// other orders, so the measured distance is far below it.
const mtpTolerance = 1e-3

// dsaTie is the relative gap between the MTP block's top_k-th and next
// indexer scores within which the two implementations may keep different
// keys: their inputs differ by float rounding, more so along a chain of
// drafts, and a key at the boundary then goes either way. A draft whose
// chain passes such a row is not compared (the test logs it), and most
// drafts must be compared.
const dsaTie = 1e-3

// TestMTPMatchesPyTorch runs the trained model's MTP block, fed by the trunk
// in prefill chunks, and chained drafts after it, against PyTorch's forward
// of the same (dequantized) weights: at positions before and after the
// indexer's top_k, so that the block's own DSA selection is exercised, on
// one device and on two.
func TestMTPMatchesPyTorch(t *testing.T) {
	var ref mtpRef
	if err := json.Unmarshal(testmodels.Ref(t, "glm5-tiny.Q8_0.mtp"), &ref); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []int{1, 2} {
		t.Run(fmt.Sprintf("tp%d", tp), func(t *testing.T) {
			m, err := Load(modelPath(t, "glm5-tiny.Q8_0"), Options{MTP: true, TensorParallel: tp})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			V := m.Config().VocabSize
			dst := make([]float32, V)
			worst := 0.0
			compared, skipped := 0, 0
			for _, r := range ref.Rows {
				s, err := m.NewSession(SessionOptions{MTP: true, ContextSize: 512})
				if err != nil {
					t.Fatal(err)
				}
				// Prefill in chunks of 50, the rest one token at a time.
				ids := ref.IDs[:r.Pos+1]
				var last []float32
				for len(ids) > 0 {
					if len(ids) >= 50 {
						last, err = s.PrefillLast(nil, ids[:50])
						ids = ids[50:]
					} else {
						last, err = s.Decode(ids[0])
						ids = ids[1:]
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if d := maxAbsDiff(last, r.Trunk); d > mtpTolerance {
					t.Fatalf("pos %d: trunk logits differ from PyTorch's by %g", r.Pos, d)
				}
				if err := s.Draft(dst, ref.IDs[r.Pos+1]); err != nil {
					t.Fatal(err)
				}
				tie := false
				for k, want := range r.MTP {
					if k > 0 {
						if err := s.DraftNext(dst, r.Drafts[k-1]); err != nil {
							t.Fatal(err)
						}
					}
					d := maxAbsDiff(dst, want)
					if mg := r.DSAMargin[k]; mg != nil && *mg < dsaTie {
						tie = true
					}
					if tie {
						t.Logf("pos %d, draft %d: the chain passed a DSA selection within %g of a tie: %g, not compared", r.Pos, k, dsaTie, d)
						skipped++
						continue
					}
					compared++
					worst = max(worst, d)
					if d > mtpTolerance {
						t.Errorf("pos %d, draft %d: MTP logits differ from PyTorch's by %g", r.Pos, k, d)
					}
				}
				s.Close()
			}
			if compared <= skipped {
				t.Errorf("only %d drafts away from DSA ties, %d at one: the reference positions test too little", compared, skipped)
			}
			t.Logf("MTP logits vs PyTorch: max |diff| %.2g over %d drafts (%d more at DSA ties)", worst, compared, skipped)
		})
	}
}

// TestMTPRewind cuts a session back and runs on, checking that the MTP
// block's cache rewinds with the trunk's: the draft at the end equals
// PyTorch's uncut run, past the indexer's top_k (so both caches' DSA keys
// are involved). Going on with the token the block's last row was made
// from needs nothing more; another token needs the trunk's hidden state
// at the cut, which the rows of the last forward call keep, and otherwise
// the tokens from MTPResume run again (running on without is an error).
func TestMTPRewind(t *testing.T) {
	var ref mtpRef
	if err := json.Unmarshal(testmodels.Ref(t, "glm5-tiny.Q8_0.mtp"), &ref); err != nil {
		t.Fatal(err)
	}
	r := ref.Rows[len(ref.Rows)-1] // the last position, past top_k
	m, err := Load(modelPath(t, "glm5-tiny.Q8_0"), Options{MTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dst := make([]float32, m.Config().VocabSize)
	ids := ref.IDs
	end := r.Pos + 1 // tokens [0, end) go in; the draft is at r.Pos
	run := func(t *testing.T, s *Session, from int) {
		t.Helper()
		for p := from; p < end; p++ {
			if _, err := s.Decode(ids[p]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Draft(dst, ids[end]); err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(dst, r.MTP[0]); d > mtpTolerance {
			t.Errorf("MTP logits after the cut differ from PyTorch's by %g", d)
		}
	}
	t.Run("within the last call", func(t *testing.T) {
		s, err := m.NewSession(SessionOptions{MTP: true, ContextSize: 512})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.PrefillLast(nil, ids[:end-10]); err != nil {
			t.Fatal(err)
		}
		if err := s.Draft(dst, ids[end-10]); err != nil { // a draft row, then cut
			t.Fatal(err)
		}
		cut := end - 60
		if err := s.Truncate(cut); err != nil {
			t.Fatal(err)
		}
		for _, next := range []int32{ids[cut], ids[cut] + 1} {
			if got := s.MTPResume(next); got != cut {
				t.Fatalf("MTPResume(%d) %d after a cut within the last call, want %d", next, got, cut)
			}
		}
		run(t, s, cut)
	})
	t.Run("before the last call", func(t *testing.T) {
		s, err := m.NewSession(SessionOptions{MTP: true, ContextSize: 512})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.PrefillLast(nil, ids[:end-30]); err != nil {
			t.Fatal(err)
		}
		for p := end - 30; p < end-5; p++ {
			if _, err := s.Decode(ids[p]); err != nil {
				t.Fatal(err)
			}
		}
		cut := end - 60
		if err := s.Truncate(cut); err != nil {
			t.Fatal(err)
		}
		// Going on with the same token needs nothing run again; another
		// token remakes the block's row cut−1, whose hidden state is gone.
		if got := s.MTPResume(ids[cut]); got != cut {
			t.Fatalf("MTPResume(the same token) %d after a cut before the last call, want %d", got, cut)
		}
		other := (ids[cut] + 1) % int32(m.Config().VocabSize)
		resume := s.MTPResume(other)
		if resume != cut-1 {
			t.Fatalf("MTPResume(another token) %d after a cut before the last call, want %d", resume, cut-1)
		}
		if _, err := s.Decode(other); err == nil {
			t.Fatal("another token without running the tokens from MTPResume again: no error")
		}
		if err := s.Truncate(resume); err != nil {
			t.Fatal(err)
		}
		run(t, s, resume)
	})
}

// TestMTPMisuse: asking for the MTP block where there is none, or drafting
// out of order, is an error that says so, never a panic.
func TestMTPMisuse(t *testing.T) {
	if _, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{MTP: true}); err == nil || !strings.Contains(err.Error(), "nextn_predict_layers") {
		t.Errorf("MTP on a model without an MTP block: %v, want an error naming nextn_predict_layers", err)
	}
	plain := loadTest(t, "glm5-mini-nextn.Q8_0")
	if _, err := plain.NewSession(SessionOptions{MTP: true}); err == nil {
		t.Error("an MTP session on a model loaded without Options.MTP: no error")
	}
	s, err := plain.NewSession(SessionOptions{ContextSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	V := plain.Config().VocabSize
	if err := s.Draft(make([]float32, V), 1); err == nil {
		t.Error("Draft on a session without MTP: no error")
	}
	m, err := Load(modelPath(t, "glm5-mini-nextn.Q8_0"), Options{MTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ms, err := m.NewSession(SessionOptions{MTP: true, ContextSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	dst := make([]float32, V)
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"Draft on an empty sequence", func() error { return ms.Draft(dst, 1) }},
		{"DraftNext before Draft", func() error { return ms.DraftNext(dst, 1) }},
		{"Draft into a short slice", func() error { return ms.Draft(dst[:3], 1) }},
		{"Draft of a token outside the vocabulary", func() error { return ms.Draft(dst, int32(V)) }},
	} {
		if err := tc.f(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, err := ms.Prefill([]int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := ms.Draft(dst, 4); err != nil {
		t.Fatal(err)
	}
	// Drafts past the context are an error, not a write beyond the cache.
	var last error
	for range 20 {
		if last = ms.DraftNext(dst, 5); last != nil {
			break
		}
	}
	if last == nil || !errors.Is(last, ErrContextFull) {
		t.Errorf("drafting past the context: %v, want an error wrapping ErrContextFull", last)
	}
}

// TestDecodeBatchRows: several tokens for each of several sessions in one
// batched pass (speculative decoding's verification step in the server)
// give, with batch-invariant products, bit for bit what each session's own
// DecodeTokens gives, and leave the MTP blocks where they would be: the
// drafts after the pass are equal too. Sessions start at positions on
// both sides of the indexer's top_k.
func TestDecodeBatchRows(t *testing.T) {
	var ref mtpRef
	if err := json.Unmarshal(testmodels.Ref(t, "glm5-tiny.Q8_0.mtp"), &ref); err != nil {
		t.Fatal(err)
	}
	m, err := Load(modelPath(t, "glm5-tiny.Q8_0"), Options{MTP: true, Fast: true, BatchInvariant: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	starts := []int{20, 150, 60}
	counts := []int{3, 1, 5}
	open := func() []*Session {
		var ss []*Session
		for _, p := range starts {
			s, err := m.NewSession(SessionOptions{MTP: true, ContextSize: 512})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if _, err := s.PrefillLast(nil, ref.IDs[:p]); err != nil {
				t.Fatal(err)
			}
			ss = append(ss, s)
		}
		return ss
	}
	batched, alone := open(), open()
	tokens := make([][]int32, len(starts))
	for i, p := range starts {
		tokens[i] = ref.IDs[p : p+counts[i]]
	}
	rows, err := DecodeBatchRows(batched, tokens)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config().VocabSize
	a, b := make([]float32, V), make([]float32, V)
	r := 0
	for i, s := range alone {
		want, err := s.DecodeTokens(tokens[i])
		if err != nil {
			t.Fatal(err)
		}
		for j := range want {
			if d := maxAbsDiff(rows[r], want[j]); d != 0 {
				t.Errorf("session %d row %d: batched logits differ by %g", i, j, d)
			}
			r++
		}
		next := ref.IDs[starts[i]+counts[i]]
		if err := s.Draft(a, next); err != nil {
			t.Fatal(err)
		}
		if err := batched[i].Draft(b, next); err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(a, b); d != 0 {
			t.Errorf("session %d: the draft after the batched pass differs by %g", i, d)
		}
	}
	if _, err := DecodeBatchRows([]*Session{batched[0], batched[0]}, [][]int32{{1}, {2}}); err == nil {
		t.Error("a session twice: no error")
	}
	if _, err := DecodeBatchRows(batched, tokens[:1]); err == nil {
		t.Error("fewer token lists than sessions: no error")
	}
}

// TestSpeculateDeepseek2 runs greedy speculative decoding (Session.Speculate)
// on a deepseek2 model with an MTP block, built here from ds2-mini (block 3
// a copy of block 2 plus nextn tensors: a seeded random eh_proj, the
// model's embedding and norms): its tokens are plain greedy decoding's,
// with batch-invariant products, at every draft length.
func TestSpeculateDeepseek2(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	eh := make([]float32, 512*256)
	for i := range eh {
		eh[i] = float32(r.NormFloat64() * 0.05)
	}
	path := rewrite(t, modelPath(t, "ds2-mini.Q8_0"), func(f *gguf.File, w *gguf.Writer) error {
		return addNextN(f, w, "deepseek2", 3, false, eh)
	})
	m, err := Load(path, Options{MTP: true, Fast: true, BatchInvariant: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := p2(t)
	const n = 40
	run := func(k int) []int32 {
		s, err := m.NewSession(SessionOptions{MTP: true, ContextSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		last, err := s.PrefillLast(nil, prompt)
		if err != nil {
			t.Fatal(err)
		}
		out := []int32{argmax(last)}
		smp, _ := sample.New(sample.Options{})
		var b SpecBuffers
		for len(out) < n {
			if k == 0 {
				l, err := s.Decode(out[len(out)-1])
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, argmax(l))
				continue
			}
			r, err := s.Speculate(out[len(out)-1], k, smp, &b)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.Tokens...)
		}
		return out[:n]
	}
	want := run(0)
	for _, k := range []int{1, 2, 4} {
		if got := run(k); !slices.Equal(got, want) {
			t.Errorf("K=%d: %v, plain greedy %v", k, got, want)
		}
	}
}
