package tokenizer

// Pre-tokenizers split text into words before BPE, exactly as llama.cpp
// does for each tokenizer.ggml.pre value (src/llama-vocab.cpp picks a list
// of regexes; src/unicode.cpp applies them one after the other, each to
// every piece the previous one produced). They are hand-written here:
// Go's regexp has no lookahead (\s+(?!\S)) and a backtracking engine would
// be slow on the hot path.
//
// Two regex engines meet in llama.cpp and both are reproduced:
//   - the GPT-2 and Llama-3 regexes have dedicated splitters
//     (unicode_regex_split_custom_gpt2/_llama3) using full Unicode classes;
//   - the others run through std::regex, on the text "collapsed" to one
//     byte per codepoint when the regex names \p{..} classes (ASCII stays,
//     other codepoints become their class; \p{S} then misses ASCII '~'), or
//     on the raw codepoints when it only has literal ranges (non-ASCII
//     whitespace is replaced by \v, so it never matches a literal range).
//     Text between two matches becomes a word of its own.

// stage splits the codepoints cps[lo:hi] into words and appends the end
// index of each word to ends. cls holds the classes of cps.
type stage func(cps []rune, cls []class, lo, hi int, ends []int32) []int32

// preTokenizer is the ordered list of stages for one pre value.
type preTokenizer struct {
	name   string
	stages []stage
}

// split returns the end index of every word of cps. ends and tmp are
// scratch buffers that may be reused.
func (p *preTokenizer) split(cps []rune, cls []class, ends, tmp []int32) (words, scratch []int32) {
	ends = append(ends[:0], int32(len(cps)))
	if len(cps) == 0 {
		return ends[:0], tmp
	}
	for _, st := range p.stages {
		tmp = tmp[:0]
		lo := 0
		for _, e := range ends {
			tmp = st(cps, cls, lo, int(e), tmp)
			lo = int(e)
		}
		ends, tmp = tmp, ends
	}
	return ends, tmp
}

// preTokenizers maps the supported tokenizer.ggml.pre values (with
// llama.cpp's aliases) to their splitters. ignoreMerges and addBOS are the
// defaults llama.cpp sets for that value.
type preInfo struct {
	pre          *preTokenizer
	ignoreMerges bool
	addBOS       bool
}

func lookupPre(name string) (preInfo, bool) {
	switch name {
	case "llama-bpe", "llama3", "llama-v3":
		return preInfo{pre: &preTokenizer{name: "llama3", stages: []stage{llama3Stage(3)}}, ignoreMerges: true, addBOS: true}, true
	case "glm4", "chatglm-bpe":
		// GLM's tokenizer.json sets "ignore_merges": true; llama.cpp follows
		// it (the build the refs were made with, 11669, does): a word that is a
		// token is taken whole.
		return preInfo{pre: &preTokenizer{name: name, stages: []stage{llama3Stage(3)}}, ignoreMerges: true}, true
	case "dbrx", "smaug-bpe":
		return preInfo{pre: &preTokenizer{name: name, stages: []stage{llama3Stage(3)}}}, true
	case "qwen2", "deepseek-r1-qwen":
		return preInfo{pre: &preTokenizer{name: "qwen2", stages: []stage{llama3Stage(1)}}}, true
	case "gpt-2", "phi-2":
		return preInfo{pre: &preTokenizer{name: "gpt-2", stages: []stage{gpt2Stage}}}, true
	case "deepseek-v3":
		return preInfo{pre: &preTokenizer{name: name, stages: []stage{
			regexStage(matchDigits3),
			regexStage(matchRangeRun(cjkKanaRanges)),
			regexStage(matchDeepseek3),
		}}}, true
	case "deepseek-llm":
		return preInfo{pre: &preTokenizer{name: name, stages: []stage{
			regexStage(matchNewline),
			regexStage(matchOptSpaceRun(func(r rune, c class) bool { return c&clsSpace == 0 && inRanges(r, casedRanges) })),
			regexStage(matchOptSpaceRun(func(r rune, c class) bool { return c&clsSpace == 0 && inRanges(r, punctRangesLLM) })),
			trailingSpaceStage,
			regexStage(matchRangeRun(cjkHangulRanges)),
			regexStage(matchNumberRun),
		}}}, true
	case "deepseek-coder":
		return preInfo{pre: &preTokenizer{name: name, stages: []stage{
			regexStage(matchNewline),
			regexStage(matchOptSpaceRun(func(_ rune, c class) bool { return c&clsLetter != 0 })),
			regexStage(matchOptSpaceRun(func(_ rune, c class) bool { return c&clsPunct != 0 })),
			regexStage(matchRangeRun(cjkHangulRanges)),
			regexStage(matchNumber),
		}}}, true
	}
	return preInfo{}, false
}

// SupportedPre returns the tokenizer.ggml.pre values this package splits
// like llama.cpp (aliases included).
func SupportedPre() []string {
	return []string{
		"glm4", "chatglm-bpe", "llama-bpe", "llama3", "llama-v3", "dbrx", "smaug-bpe",
		"qwen2", "deepseek-r1-qwen", "deepseek-v3", "deepseek-llm", "deepseek-coder", "gpt-2", "phi-2",
	}
}

// gpt2Stage implements
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//
// as llama.cpp's unicode_regex_split_custom_gpt2 does.
func gpt2Stage(cps []rune, cls []class, lo, hi int, ends []int32) []int32 {
	at := func(i int) rune {
		if i < hi {
			return cps[i]
		}
		return -1
	}
	clsAt := func(i int) class {
		if i < hi {
			return cls[i]
		}
		return 0
	}
	other := func(i int) bool { return i < hi && cls[i]&(clsSpace|clsLetter|clsNumber) == 0 }
	for pos := lo; pos < hi; {
		c := cps[pos]
		// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
		if c == '\'' && pos+1 < hi {
			n := cps[pos+1]
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += 2
				ends = append(ends, int32(pos))
				continue
			}
			if pos+2 < hi {
				nn := cps[pos+2]
				if n == 'r' && nn == 'e' || n == 'v' && nn == 'e' || n == 'l' && nn == 'l' {
					pos += 3
					ends = append(ends, int32(pos))
					continue
				}
			}
		}
		first := pos
		if c == ' ' {
			first = pos + 1
		}
		switch f := clsAt(first); {
		case f&clsLetter != 0: // ' ?\p{L}+'
			pos = first
			for pos < hi && cls[pos]&clsLetter != 0 {
				pos++
			}
			ends = append(ends, int32(pos))
			continue
		case f&clsNumber != 0: // ' ?\p{N}+'
			pos = first
			for pos < hi && cls[pos]&clsNumber != 0 {
				pos++
			}
			ends = append(ends, int32(pos))
			continue
		case other(first): // ' ?[^\s\p{L}\p{N}]+'
			pos = first
			for other(pos) {
				pos++
			}
			ends = append(ends, int32(pos))
			continue
		}
		n := 0
		for clsAt(pos+n)&clsSpace != 0 {
			n++
		}
		switch {
		case n > 1 && at(pos+n) >= 0: // '\s+(?!\S)': leave one space for the next word
			pos += n - 1
		case n > 0: // '\s+' at the end of the piece
			pos += n
		default: // nothing matches: one codepoint on its own
			pos++
		}
		ends = append(ends, int32(pos))
	}
	return ends
}

// llama3Stage implements, with maxDigits = 3 (llama-bpe, glm4),
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// as llama.cpp's unicode_regex_split_custom_llama3 does; maxDigits = 1 is
// the qwen2 regex (\p{N} instead of \p{N}{1,3}), which std::regex
// evaluates with the same result.
func llama3Stage(maxDigits int) stage {
	return func(cps []rune, cls []class, lo, hi int, ends []int32) []int32 {
		clsAt := func(i int) class {
			if i < hi {
				return cls[i]
			}
			return 0
		}
		other := func(i int) bool { return i < hi && cls[i]&(clsSpace|clsLetter|clsNumber) == 0 }
		for pos := lo; pos < hi; {
			c := cps[pos]
			f := cls[pos]
			// (?i:'s|'t|'re|'ve|'m|'ll|'d)
			if c == '\'' && pos+1 < hi {
				n := asciiLower(cps[pos+1])
				if n == 's' || n == 't' || n == 'm' || n == 'd' {
					pos += 2
					ends = append(ends, int32(pos))
					continue
				}
				if pos+2 < hi {
					nn := asciiLower(cps[pos+2])
					if n == 'r' && nn == 'e' || n == 'v' && nn == 'e' || n == 'l' && nn == 'l' {
						pos += 3
						ends = append(ends, int32(pos))
						continue
					}
				}
			}
			// [^\r\n\p{L}\p{N}]?\p{L}+
			if c != '\r' && c != '\n' && f&clsNumber == 0 && (f&clsLetter != 0 || clsAt(pos+1)&clsLetter != 0) {
				pos++
				for pos < hi && cls[pos]&clsLetter != 0 {
					pos++
				}
				ends = append(ends, int32(pos))
				continue
			}
			// \p{N}{1,maxDigits}
			if f&clsNumber != 0 {
				n := 0
				for pos < hi && cls[pos]&clsNumber != 0 && n < maxDigits {
					pos++
					n++
				}
				ends = append(ends, int32(pos))
				continue
			}
			// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
			first := pos
			if c == ' ' {
				first = pos + 1
			}
			if other(first) || (c == ' ' && first == hi) {
				// A lone trailing ' ' takes this branch in llama.cpp too and
				// ends up a word of its own, as '\s+' would make it.
				pos = first
				for other(pos) {
					pos++
				}
				for pos < hi && (cps[pos] == '\r' || cps[pos] == '\n') {
					pos++
				}
				ends = append(ends, int32(pos))
				continue
			}
			n, lastNL := 0, -1
			for clsAt(pos+n)&clsSpace != 0 {
				if r := cps[pos+n]; r == '\r' || r == '\n' {
					lastNL = pos + n + 1
				}
				n++
			}
			switch {
			case lastNL >= 0: // \s*[\r\n]+
				pos = lastNL
			case n > 1 && pos+n < hi: // \s+(?!\S)
				pos += n - 1
			case n > 0: // \s+
				pos += n
			default:
				pos++
			}
			ends = append(ends, int32(pos))
		}
		return ends
	}
}

func asciiLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// matcher reports the end of the match of a regex anchored at cps[pos]
// within cps[:hi], or pos when it does not match there.
type matcher func(cps []rune, cls []class, pos, hi int) int

// regexStage runs m like std::regex_iterator over a piece: the leftmost
// match is a word, and so is the unmatched text before it.
func regexStage(m matcher) stage {
	return func(cps []rune, cls []class, lo, hi int, ends []int32) []int32 {
		gap := lo
		for pos := lo; pos < hi; {
			end := m(cps, cls, pos, hi)
			if end <= pos {
				pos++
				continue
			}
			if pos > gap {
				ends = append(ends, int32(pos))
			}
			ends = append(ends, int32(end))
			pos, gap = end, end
		}
		if gap < hi {
			ends = append(ends, int32(hi))
		}
		return ends
	}
}

// trailingSpaceStage is regexStage for \s+$: the whitespace that ends the
// piece, found directly instead of trying every start.
func trailingSpaceStage(cps []rune, cls []class, lo, hi int, ends []int32) []int32 {
	t := hi
	for t > lo && cls[t-1]&clsSpace != 0 {
		t--
	}
	if t > lo && t < hi {
		ends = append(ends, int32(t))
	}
	return append(ends, int32(hi))
}

// matchNewline is [\r\n].
func matchNewline(cps []rune, _ []class, pos, _ int) int {
	if cps[pos] == '\r' || cps[pos] == '\n' {
		return pos + 1
	}
	return pos
}

// matchNumber is \p{N}.
func matchNumber(_ []rune, cls []class, pos, _ int) int {
	if cls[pos]&clsNumber != 0 {
		return pos + 1
	}
	return pos
}

// matchNumberRun is \p{N}+.
func matchNumberRun(_ []rune, cls []class, pos, hi int) int {
	for pos < hi && cls[pos]&clsNumber != 0 {
		pos++
	}
	return pos
}

// matchDigits3 is \p{N}{1,3}.
func matchDigits3(_ []rune, cls []class, pos, hi int) int {
	for n := 0; n < 3 && pos < hi && cls[pos]&clsNumber != 0; n++ {
		pos++
	}
	return pos
}

// matchOptSpaceRun is \s?X+ for the class in.
func matchOptSpaceRun(in func(r rune, c class) bool) matcher {
	return func(cps []rune, cls []class, pos, hi int) int {
		start := pos
		if cls[pos]&clsSpace != 0 && pos+1 < hi && in(cps[pos+1], cls[pos+1]) {
			start = pos + 1
		} else if !in(cps[pos], cls[pos]) {
			return pos
		}
		end := start
		for end < hi && in(cps[end], cls[end]) {
			end++
		}
		return end
	}
}

// matchRangeRun is [ranges]+ on raw codepoints (std::wregex), where
// non-ASCII whitespace never matches (llama.cpp replaces it by \v).
func matchRangeRun(ranges []runeRange) matcher {
	return func(cps []rune, cls []class, pos, hi int) int {
		for pos < hi && cls[pos]&clsSpace == 0 && inRanges(cps[pos], ranges) {
			pos++
		}
		return pos
	}
}

// matchDeepseek3 is deepseek-v3's main regex on collapsed text:
//
//	[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// In the collapsed text \p{S} lacks ASCII '~' (llama.cpp's ASCII table for
// symbols is $+<=>^`|), so '~' falls in the [^...] class instead.
func matchDeepseek3(cps []rune, cls []class, pos, hi int) int {
	c := cps[pos]
	ps := func(i int) bool { return cls[i]&(clsPunct|clsSymbol) != 0 && cps[i] != '~' }
	lm := func(i int) bool { return cls[i]&(clsLetter|clsMark) != 0 }
	asciiLetter := func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' }
	// [ASCII punctuation][A-Za-z]+
	if c < 0x80 && asciiClass[c]&(clsPunct|clsSymbol) != 0 && pos+1 < hi && asciiLetter(cps[pos+1]) {
		end := pos + 2
		for end < hi && asciiLetter(cps[end]) {
			end++
		}
		return end
	}
	// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
	start := -1
	if c != '\r' && c != '\n' && cls[pos]&clsLetter == 0 && !ps(pos) && pos+1 < hi && lm(pos+1) {
		start = pos + 1
	} else if lm(pos) {
		start = pos
	}
	if start >= 0 {
		end := start
		for end < hi && lm(end) {
			end++
		}
		return end
	}
	// ' ?[\p{P}\p{S}]+[\r\n]*'
	start = -1
	if c == ' ' && pos+1 < hi && ps(pos+1) {
		start = pos + 1
	} else if ps(pos) {
		start = pos
	}
	if start >= 0 {
		end := start
		for end < hi && ps(end) {
			end++
		}
		for end < hi && (cps[end] == '\r' || cps[end] == '\n') {
			end++
		}
		return end
	}
	return matchSpaces(cps, cls, pos, hi)
}

// matchSpaces is \s*[\r\n]+|\s+(?!\S)|\s+ anchored at pos.
func matchSpaces(cps []rune, cls []class, pos, hi int) int {
	end, lastNL := pos, -1
	for end < hi && cls[end]&clsSpace != 0 {
		if cps[end] == '\r' || cps[end] == '\n' {
			lastNL = end + 1
		}
		end++
	}
	switch {
	case lastNL >= 0:
		return lastNL
	case end-pos > 1 && end < hi:
		return end - 1
	}
	return end
}

// runeRange is an inclusive codepoint range of a literal regex class.
type runeRange struct{ lo, hi rune }

func inRanges(r rune, rs []runeRange) bool {
	for _, x := range rs {
		if r >= x.lo && r <= x.hi {
			return true
		}
	}
	return false
}

// cjkKanaRanges is deepseek-v3's [一-龥぀-ゟ゠-ヿ].
var cjkKanaRanges = []runeRange{{0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF}}

// cjkHangulRanges is deepseek-llm/coder's [一-龥ࠀ-一가-퟿].
var cjkHangulRanges = []runeRange{{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}}

// punctRangesLLM is deepseek-llm's [!-/:-~！-／：-～‘-‟　-。].
var punctRangesLLM = []runeRange{{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002}}

// casedRanges is deepseek-llm's letter class (the cased letters of the
// Unicode version it was generated from), as literal ranges.
var casedRanges = []runeRange{
	{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
	{0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
	{0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
	{0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
	{0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
	{0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
	{0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
	{0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
	{0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
	{0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
	{0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
	{0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
	{0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
	{0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}
