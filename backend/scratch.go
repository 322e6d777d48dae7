package backend

// Scratch is a device buffer reused for values of varying size: Get
// returns a view of n values, reallocating only when n exceeds what the
// last allocation holds. The zero value is ready once Dev is set.
type Scratch struct {
	Dev  Device
	full Buffer
}

// Get returns a buffer of n values (contents undefined).
func (s *Scratch) Get(n int) (Buffer, error) {
	if s.full == nil || s.full.Len() < n {
		if s.full != nil {
			s.Dev.Free(s.full)
			s.full = nil
		}
		b, err := s.Dev.Alloc(n)
		if err != nil {
			return nil, err
		}
		s.full = b
	}
	return s.full.Slice(0, n), nil
}

// Free returns the memory to the device.
func (s *Scratch) Free() {
	if s.full != nil {
		s.Dev.Free(s.full)
		s.full = nil
	}
}

// ScratchIDs is Scratch for IDs.
type ScratchIDs struct {
	Dev  Device
	full IDs
}

// Get returns an array of n ids (contents undefined).
func (s *ScratchIDs) Get(n int) (IDs, error) {
	if s.full == nil || s.full.Len() < n {
		if s.full != nil {
			s.Dev.FreeIDs(s.full)
			s.full = nil
		}
		b, err := s.Dev.AllocIDs(n)
		if err != nil {
			return nil, err
		}
		s.full = b
	}
	return s.full.Slice(0, n), nil
}

// Free returns the memory to the device.
func (s *ScratchIDs) Free() {
	if s.full != nil {
		s.Dev.FreeIDs(s.full)
		s.full = nil
	}
}
