// Package schematest draws random JSON Schemas of the subset structured
// output supports, and validates values against them, for the tests of the
// grammar compiler and of the server's response_format.
package schematest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"unicode/utf8"
)

// Random draws a schema with bounded strings and arrays, so that every
// text it allows is finite: objects with required and optional properties
// (no others allowed), arrays, strings, integers, numbers, booleans, null,
// enum, const and anyOf, nested up to three deep.
func Random(r *rand.Rand) map[string]any { return random(r, 0) }

// random draws a schema of the supported subset with bounded
// strings and arrays, so that every sentence is finite.
func random(r *rand.Rand, depth int) map[string]any {
	kinds := []string{"string", "integer", "number", "boolean", "null", "enum", "const"}
	if depth < 3 {
		kinds = append(kinds, "array", "object", "object", "anyOf")
	}
	switch k := kinds[r.IntN(len(kinds))]; k {
	case "string":
		lo := r.IntN(3)
		return map[string]any{"type": "string", "minLength": lo, "maxLength": lo + r.IntN(6)}
	case "enum":
		return map[string]any{"enum": []any{"red", 7, "g\"reen", nil, 2.5}[:1+r.IntN(5)]}
	case "const":
		return map[string]any{"const": map[string]any{"k": []any{1, "two"}}}
	case "array":
		lo := r.IntN(2)
		return map[string]any{"type": "array", "items": random(r, depth+1), "minItems": lo, "maxItems": lo + r.IntN(3)}
	case "object":
		props := map[string]any{}
		var req []any
		for i := range 1 + r.IntN(3) {
			name := fmt.Sprintf("p%d", i)
			props[name] = random(r, depth+1)
			if r.IntN(2) == 0 {
				req = append(req, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(req) > 0 {
			s["required"] = req
		}
		return s
	case "anyOf":
		return map[string]any{"anyOf": []any{random(r, depth+1), random(r, depth+1)}}
	default:
		return map[string]any{"type": k}
	}
}

// Validate checks value v (decoded with json.Decoder.UseNumber) against
// schema s, a schema Random drew, independently of any grammar.
func Validate(s map[string]any, v any) error {
	if e, ok := s["enum"]; ok {
		for _, x := range e.([]any) {
			if jsonEqual(x, v) {
				return nil
			}
		}
		return fmt.Errorf("%v not in enum %v", v, e)
	}
	if c, ok := s["const"]; ok {
		if !jsonEqual(c, v) {
			return fmt.Errorf("%v is not the const %v", v, c)
		}
		return nil
	}
	if a, ok := s["anyOf"]; ok {
		for _, x := range a.([]any) {
			if Validate(x.(map[string]any), v) == nil {
				return nil
			}
		}
		return fmt.Errorf("%v matches no anyOf branch", v)
	}
	switch s["type"] {
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%v is not a string", v)
		}
		if n := utf8.RuneCountInString(str); n < s["minLength"].(int) || n > s["maxLength"].(int) {
			return fmt.Errorf("%q has %d characters, not in [%v, %v]", str, n, s["minLength"], s["maxLength"])
		}
	case "integer":
		n, ok := v.(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			return fmt.Errorf("%v is not an integer", v)
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("%v is not a number", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%v is not a boolean", v)
		}
	case "null":
		if v != nil {
			return fmt.Errorf("%v is not null", v)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%v is not an array", v)
		}
		if len(a) < s["minItems"].(int) || len(a) > s["maxItems"].(int) {
			return fmt.Errorf("array of %d items, not in [%v, %v]", len(a), s["minItems"], s["maxItems"])
		}
		for _, x := range a {
			if err := Validate(s["items"].(map[string]any), x); err != nil {
				return err
			}
		}
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%v is not an object", v)
		}
		props := s["properties"].(map[string]any)
		for k, x := range o {
			ps, ok := props[k]
			if !ok {
				return fmt.Errorf("property %q is not allowed", k)
			}
			if err := Validate(ps.(map[string]any), x); err != nil {
				return err
			}
		}
		req, _ := s["required"].([]any)
		for _, k := range req {
			if _, ok := o[k.(string)]; !ok {
				return fmt.Errorf("required property %q is missing", k)
			}
		}
	}
	return nil
}

func jsonEqual(a, b any) bool {
	ab, _ := json.Marshal(a)
	var x any
	d := json.NewDecoder(bytes.NewReader(ab))
	d.UseNumber()
	_ = d.Decode(&x)
	xb, _ := json.Marshal(x)
	bb, _ := json.Marshal(b)
	// Numbers compare by value: 2.5 and 2.50 are the same number.
	var fa, fb any
	_ = json.Unmarshal(xb, &fa)
	_ = json.Unmarshal(bb, &fb)
	fab, _ := json.Marshal(fa)
	fbb, _ := json.Marshal(fb)
	return bytes.Equal(fab, fbb)
}
