// Package npy reads and writes NumPy .npy files (format version 1.0) holding
// little-endian float32 or int32 arrays in C order: the format glmrun uses
// for tensors and hidden-state dumps, so that numpy.load opens them.
package npy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

var magic = []byte("\x93NUMPY")

// header returns the version 1.0 header for an array of dtype descr and the
// given shape, padded so that the data starts on a 64-byte boundary.
func header(descr string, shape []int) []byte {
	h, _ := Header(descr, shape, 0) // with size 0 it cannot fail
	return h
}

// Header returns the format 1.0 header of a little-endian C-order array of
// dtype descr ("<f4", "<i4") and shape, padded with spaces to exactly size
// bytes, so that a writer that streams the data first can write the header
// in place once the shape is known. Size 0 means the shortest length that
// keeps the data 64-byte aligned. It fails when the header needs more than
// size bytes.
func Header(descr string, shape []int, size int) ([]byte, error) {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	s := strings.Join(dims, ", ")
	if len(shape) == 1 {
		s += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, s)
	const pre = 10 // magic (6), version (2), header length (2)
	need := pre + len(dict) + 1
	switch {
	case size == 0:
		size = need + (64-need%64)%64
	case need > size:
		return nil, fmt.Errorf("npy: header for shape %v needs %d bytes, more than %d", shape, need, size)
	}
	h := make([]byte, 0, size)
	h = append(h, magic...)
	h = append(h, 1, 0)
	h = binary.LittleEndian.AppendUint16(h, uint16(size-pre))
	h = append(h, dict...)
	for len(h) < size-1 {
		h = append(h, ' ')
	}
	return append(h, '\n'), nil
}

func count(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("npy: negative dimension in shape %v", shape)
		}
		n *= d
	}
	return n, nil
}

// WriteFloat32 writes data, a C-order array of the given shape, to w.
func WriteFloat32(w io.Writer, shape []int, data []float32) error {
	return write(w, "<f4", shape, data, math.Float32bits)
}

// write writes the header for descr and shape, then each value of data as
// the four little-endian bytes that bits gives for it.
func write[T any](w io.Writer, descr string, shape []int, data []T, bits func(T) uint32) error {
	n, err := count(shape)
	if err != nil {
		return err
	}
	if n != len(data) {
		return fmt.Errorf("npy: shape %v needs %d values, have %d", shape, n, len(data))
	}
	bw := bufio.NewWriter(w)
	bw.Write(header(descr, shape))
	var b [4]byte
	for _, v := range data {
		binary.LittleEndian.PutUint32(b[:], bits(v))
		bw.Write(b[:])
	}
	return bw.Flush()
}

// WriteFloat32File writes data to a new file at path (see WriteFloat32).
func WriteFloat32File(path string, shape []int, data []float32) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteFloat32(f, shape, data); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// WriteInt32 writes data, a C-order int32 array of the given shape, to w.
func WriteInt32(w io.Writer, shape []int, data []int32) error {
	return write(w, "<i4", shape, data, func(v int32) uint32 { return uint32(v) })
}

// Array is an array read from a .npy file. Exactly one of F32 and I32 is set.
type Array struct {
	Shape []int
	F32   []float32
	I32   []int32
}

var (
	descrRE = regexp.MustCompile(`'descr':\s*'([^']*)'`)
	fortRE  = regexp.MustCompile(`'fortran_order':\s*(True|False)`)
	shapeRE = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)
)

// maxHeader bounds the header length we accept, against corrupt files.
const maxHeader = 1 << 16

// Read reads a .npy file holding a little-endian f4 or i4 array in C order.
// size is the number of bytes available in r, used to reject a header that
// claims more data than the file holds before allocating.
func Read(r io.Reader, size int64) (*Array, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, fmt.Errorf("npy: reading magic: %w", err)
	}
	if string(pre[:6]) != string(magic) {
		return nil, errors.New("npy: not a .npy file (bad magic)")
	}
	var hlen int
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("npy: reading header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
		if hlen > maxHeader {
			return nil, fmt.Errorf("npy: header length %d too large", hlen)
		}
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d.%d", pre[6], pre[7])
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, fmt.Errorf("npy: reading header: %w", err)
	}
	h := string(hb)
	m := descrRE.FindStringSubmatch(h)
	if m == nil {
		return nil, fmt.Errorf("npy: header has no descr: %q", h)
	}
	descr := m[1]
	if f := fortRE.FindStringSubmatch(h); f != nil && f[1] == "True" {
		return nil, errors.New("npy: fortran_order arrays are not supported")
	}
	s := shapeRE.FindStringSubmatch(h)
	if s == nil {
		return nil, fmt.Errorf("npy: header has no shape: %q", h)
	}
	var shape []int
	n := int64(1)
	for _, part := range strings.Split(s[1], ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, err := strconv.Atoi(part)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("npy: bad shape %q", s[1])
		}
		shape = append(shape, d)
		n *= int64(d)
		if n > size/4+1 {
			return nil, fmt.Errorf("npy: shape (%s) needs more data than the file holds", s[1])
		}
	}
	if size >= 0 && n*4 > size {
		return nil, fmt.Errorf("npy: shape (%s) needs %d bytes, file has %d", s[1], n*4, size)
	}
	raw := make([]byte, n*4)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, fmt.Errorf("npy: reading %d values: %w", n, err)
	}
	a := &Array{Shape: shape}
	switch descr {
	case "<f4":
		a.F32 = make([]float32, n)
		for i := range a.F32 {
			a.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case "<i4":
		a.I32 = make([]int32, n)
		for i := range a.I32 {
			a.I32[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	default:
		return nil, fmt.Errorf("npy: unsupported dtype %q (want <f4 or <i4)", descr)
	}
	return a, nil
}

// ReadFile reads the .npy file at path (see Read).
func ReadFile(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	a, err := Read(bufio.NewReader(f), st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}
