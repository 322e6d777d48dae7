package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// maxJSONDepth bounds the nesting of decoded JSON so that hostile input
// cannot exhaust the stack.
const maxJSONDepth = 256

// nodeKind says what a node holds.
type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindBool
	kindInt
	kindFloat
	kindString
	kindArray
	kindObject
)

// node is a decoded JSON value that, unlike map[string]any, keeps the key
// order of objects. Numbers are split as Python's json module splits them:
// a literal without '.', 'e' or 'E' that fits an int64 is an integer,
// anything else a float.
type node struct {
	kind  nodeKind
	b     bool
	i     int64
	f     float64
	s     string
	keys  []string // object keys, parallel to items
	items []node   // array elements or object values
}

// decodeJSON decodes exactly one JSON value from raw.
func decodeJSON(raw []byte) (node, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := decodeNode(dec, 0)
	if err != nil {
		return node{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return node{}, errors.New("trailing data after JSON value")
	}
	return n, nil
}

func decodeNode(dec *json.Decoder, depth int) (node, error) {
	if depth > maxJSONDepth {
		return node{}, fmt.Errorf("JSON nested deeper than %d levels", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return node{}, err
	}
	switch t := tok.(type) {
	case nil:
		return node{kind: kindNull}, nil
	case bool:
		return node{kind: kindBool, b: t}, nil
	case string:
		return node{kind: kindString, s: t}, nil
	case json.Number:
		return numberNode(string(t))
	case json.Delim:
		switch t {
		case '[':
			n := node{kind: kindArray}
			for dec.More() {
				item, err := decodeNode(dec, depth+1)
				if err != nil {
					return node{}, err
				}
				n.items = append(n.items, item)
			}
			if _, err := dec.Token(); err != nil {
				return node{}, err
			}
			return n, nil
		case '{':
			n := node{kind: kindObject}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return node{}, err
				}
				key, ok := k.(string)
				if !ok {
					return node{}, fmt.Errorf("object key %v is not a string", k)
				}
				v, err := decodeNode(dec, depth+1)
				if err != nil {
					return node{}, err
				}
				if i := n.index(key); i >= 0 { // last duplicate wins, at its first position
					n.items[i] = v
					continue
				}
				n.keys = append(n.keys, key)
				n.items = append(n.items, v)
			}
			if _, err := dec.Token(); err != nil {
				return node{}, err
			}
			return n, nil
		}
	}
	return node{}, fmt.Errorf("unexpected JSON token %v", tok)
}

func numberNode(lit string) (node, error) {
	if !strings.ContainsAny(lit, ".eE") {
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return node{kind: kindInt, i: i}, nil
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return node{}, fmt.Errorf("number %s: %w", lit, err)
	}
	return node{kind: kindFloat, f: f}, nil
}

// index returns the position of key in an object node, or -1.
func (n *node) index(key string) int {
	for i, k := range n.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// value converts n to a template value; objects become ordered dicts.
func (n *node) value() jinja.Value {
	switch n.kind {
	case kindBool:
		return jinja.NewBool(n.b)
	case kindInt:
		return jinja.NewInt(n.i)
	case kindFloat:
		return jinja.NewFloat(n.f)
	case kindString:
		return jinja.NewString(n.s)
	case kindArray:
		items := make([]jinja.Value, len(n.items))
		for i := range n.items {
			items[i] = n.items[i].value()
		}
		return jinja.NewList(items)
	case kindObject:
		d := jinja.NewDict()
		for i, k := range n.keys {
			d.AsDict().Set(k, n.items[i].value())
		}
		return d
	}
	return jinja.None()
}

// writeJSON appends n as Python's json.dumps(n, ensure_ascii=False) writes
// it: ", " between items, ": " after keys, non-ASCII text as is. Floats use
// the shortest representation that round-trips.
func (n *node) writeJSON(sb *strings.Builder) {
	switch n.kind {
	case kindNull:
		sb.WriteString("null")
	case kindBool:
		sb.WriteString(strconv.FormatBool(n.b))
	case kindInt:
		sb.WriteString(strconv.FormatInt(n.i, 10))
	case kindFloat:
		sb.WriteString(strconv.FormatFloat(n.f, 'g', -1, 64))
	case kindString:
		writeJSONString(sb, n.s)
	case kindArray:
		sb.WriteByte('[')
		for i := range n.items {
			if i > 0 {
				sb.WriteString(", ")
			}
			n.items[i].writeJSON(sb)
		}
		sb.WriteByte(']')
	case kindObject:
		sb.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeJSONString(sb, k)
			sb.WriteString(": ")
			n.items[i].writeJSON(sb)
		}
		sb.WriteByte('}')
	}
}

// writeJSONString quotes s as encoding/json does, minus its HTML escaping
// (Python does not escape '<', '>' or '&').
func writeJSONString(sb *strings.Builder, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // cannot fail for a string
	sb.Write(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
}
