// Decoding and encoding of GGUF metadata values, internal to the gguf module and shared
// by the reader and the writer so both agree on one definition of the format. Errors
// returned here are reasons without the file path or key: the caller knows those and
// prefixes them.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"
#include "gguf/gguf_cursor.h"
#include "gguf/gguf_file.h"

namespace pagoda::gguf_detail {

// Arrays of arrays are legal GGUF; the cap keeps a crafted file from recursing until the
// stack runs out. Real files nest at most once.
inline constexpr int kMaxArrayDepth = 16;

// Bytes a scalar of type t takes on disk; 0 for STRING and ARRAY.
size_t scalar_size(GgufType t);
// The fewest bytes any value of type t can take (a count or length field at least), used
// to reject element counts the rest of the file cannot hold before allocating for them.
size_t min_encoded_size(GgufType t);

// Metadata values one file may hold in total (keys and array elements alike). Each takes
// about 50 bytes in memory however small on disk, so a corrupt count that walks an array
// over the tensor data would otherwise cost dozens of times the file's size. The largest
// real vocabularies (262k tokens with scores, types and merges) hold about 1.5M.
inline constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 24;
// Initial capacity is capped so a count that passes the size checks still cannot make
// one allocation large; vectors grow past it as elements actually parse.
inline constexpr uint64_t kMaxReserve = uint64_t{1} << 20;

// Reads one value of type t at the cursor. `depth` is the number of enclosing arrays;
// `budget` is how many more values the file may hold, decremented as they are read.
Status read_value(Cursor& c, GgufType t, int depth, GgufValue& out, uint64_t& budget);

// Appends v's encoding (without its leading type id) to out, checking that the variant
// holds what v.type says, that integers fit their width and that array elements all have
// the array's element type.
Status append_value(std::string& out, const GgufValue& v, int depth);

template <typename T>
void append_le(std::string& out, T v) {
  // x86-64 and AArch64 Linux are little-endian, like GGUF; see the static_assert in
  // gguf_value_io.cpp.
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

inline void append_string(std::string& out, std::string_view s) {
  append_le<uint64_t>(out, s.size());
  out.append(s.data(), s.size());
}

}  // namespace pagoda::gguf_detail
