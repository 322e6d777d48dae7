package convert

import "testing"

// TestModelIDComponents checks the name heuristics against what gguf-py's
// Metadata.get_model_id_components and id_to_title return for the same ids
// (with a 7B-parameter model, which decides whether "7B" is a size).
func TestModelIDComponents(t *testing.T) {
	tests := []struct {
		id                                             string
		title, org, basename, finetune, version, label string
	}{
		{"glm5-hfs", "Glm5 Hfs", "", "", "", "", ""},
		{"glm5-fp8s", "Glm5 Fp8S", "", "", "", "", ""},
		{"GLM-5", "GLM 5", "", "GLM", "", "5", ""},
		{"GLM-5-FP8", "GLM 5 FP8", "", "", "", "", ""},
		{"zai-org/GLM-4.7-Flash", "GLM 4.7 Flash", "zai-org", "", "", "", ""},
		{"DeepSeek-V3", "DeepSeek V3", "", "DeepSeek", "", "V3", ""},
		{"deepseek-ai/DeepSeek-V3-0324", "DeepSeek V3 0324", "deepseek-ai", "DeepSeek", "", "V3-0324", ""},
		{"Mixtral-8x7B-Instruct-v0.1", "Mixtral 8x7B Instruct v0.1", "", "Mixtral", "Instruct", "v0.1", "8x7B"},
		{"bloom-7b1", "Bloom 7b1", "", "bloom", "", "", "7.1B"},
		{"Meta-Llama-3-8B-Instruct", "Meta Llama 3 8B Instruct", "", "Meta-Llama-3", "Instruct", "", "8B"},
		{"my model", "My Model", "", "", "", "", ""},
		{"GLM-5.1", "GLM 5.1", "", "GLM", "", "5.1", ""},
		{"glm-4.5-air-bf16", "Glm 4.5 Air Bf16", "", "", "", "", ""},
		{"ds3s", "Ds3S", "", "", "", "", ""},
	}
	for _, tc := range tests {
		full, org, base, fine, ver, size := modelIDComponents(tc.id, 7_000_000_000)
		if got := idToTitle(full); got != tc.title || org != tc.org || base != tc.basename || fine != tc.finetune || ver != tc.version || size != tc.label {
			t.Errorf("%q: title %q org %q basename %q finetune %q version %q size %q, want %q %q %q %q %q %q",
				tc.id, got, org, base, fine, ver, size, tc.title, tc.org, tc.basename, tc.finetune, tc.version, tc.label)
		}
	}
}

// TestSizeLabel checks the parameter-count label against gguf-py's
// size_label for the same counts.
func TestSizeLabel(t *testing.T) {
	tests := []struct {
		total, shared, expert, count int64
		want                         string
	}{
		{1289868, 0, 0, 0, "1.3M"},
		{0, 500000, 300000, 4, "4x800K"},
		{7241732096, 0, 0, 0, "7.2B"},
		{1000000, 0, 0, 0, "1000K"},
		{999500, 0, 0, 0, "1000K"},
		{46700000000, 12000000000, 200000000, 256, "256x12B"},
		{12345, 0, 0, 0, "12K"},
	}
	for _, tc := range tests {
		if got := sizeLabel(tc.total, tc.shared, tc.expert, tc.count); got != tc.want {
			t.Errorf("sizeLabel(%d, %d, %d, %d) = %q, want %q", tc.total, tc.shared, tc.expert, tc.count, got, tc.want)
		}
	}
}
