package backend

// Scratch is a device buffer reused for values of varying size: Get
// returns a view of n values, reallocating only when n exceeds what the
// last allocation holds. The last few views are kept, so that asking again
// for a recent size (every decode step asks for the same few) makes no new
// view. The zero value is ready once Dev is set.
type Scratch struct {
	Dev   Device
	full  Buffer
	views [scratchViews]struct {
		b Buffer
		n int
	}
	next int
}

// scratchViews is the number of views a Scratch keeps.
const scratchViews = 4

// Get returns a buffer of n values (contents undefined).
func (s *Scratch) Get(n int) (Buffer, error) {
	for _, v := range s.views {
		if v.b != nil && v.n == n {
			return v.b, nil
		}
	}
	if s.full == nil || s.full.Len() < n {
		s.Free()
		b, err := s.Dev.Alloc(n)
		if err != nil {
			return nil, err
		}
		s.full = b
	}
	b := s.full.Slice(0, n)
	s.views[s.next].b, s.views[s.next].n = b, n
	s.next = (s.next + 1) % scratchViews
	return b, nil
}

// Free returns the memory to the device.
func (s *Scratch) Free() {
	if s.full != nil {
		s.Dev.Free(s.full)
		s.full = nil
	}
	clear(s.views[:])
}

// ScratchIDs is Scratch for IDs.
type ScratchIDs struct {
	Dev   Device
	full  IDs
	views [scratchViews]struct {
		b IDs
		n int
	}
	next int
}

// Get returns an array of n ids (contents undefined).
func (s *ScratchIDs) Get(n int) (IDs, error) {
	for _, v := range s.views {
		if v.b != nil && v.n == n {
			return v.b, nil
		}
	}
	if s.full == nil || s.full.Len() < n {
		s.Free()
		b, err := s.Dev.AllocIDs(n)
		if err != nil {
			return nil, err
		}
		s.full = b
	}
	b := s.full.Slice(0, n)
	s.views[s.next].b, s.views[s.next].n = b, n
	s.next = (s.next + 1) % scratchViews
	return b, nil
}

// Free returns the memory to the device.
func (s *ScratchIDs) Free() {
	if s.full != nil {
		s.Dev.FreeIDs(s.full)
		s.full = nil
	}
	clear(s.views[:])
}
