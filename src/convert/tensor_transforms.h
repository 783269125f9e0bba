// The value changes a converter makes between a Hugging Face tensor and its GGUF
// counterpart, on float rows: llama.cpp's Q/K row permutation for Llama (HF's
// rotate-half RoPE layout to GGUF's interleaved pairs) and its inverse (for tests), and
// Gemma's norm shift (HF stores w for (1 + w), GGUF stores 1 + w). Pure functions,
// O(elements), thread-safe.
#pragma once

#include <cstdint>

namespace pagoda {

// in and out hold n_rows rows of row_len floats (a bias: row_len 1); the rows split into
// `heads` heads of n_rows / heads rows, an even number. Within each head, out row
// 2 i + j is in row j * (head_rows / 2) + i (j = 0, 1), as llama.cpp's permute().
// Preconditions: n_rows % heads == 0 and (n_rows / heads) even; in != out.
void rope_permute_rows(const float* in, float* out, int64_t n_rows, int64_t row_len, int32_t heads);
// The inverse: rope_unpermute_rows(rope_permute_rows(x)) == x.
void rope_unpermute_rows(const float* in, float* out, int64_t n_rows, int64_t row_len, int32_t heads);

// x[i] += 1 (Gemma's norm weights).
void add_one(float* x, int64_t n);

}  // namespace pagoda
