// pagoda-tokenize-tool: drives the tokenizer from the command line for the Python oracle
// tests (tests/tokenizer/test_*.py) and for poking at a model's vocabulary by hand.
//
//   pagoda-tokenize-tool FILE.gguf [options] < text      prints the ids of stdin
//   pagoda-tokenize-tool FILE.gguf --decode < ids        writes the bytes of the ids
//
// Options:
//   --no-add-special    do not add BOS/EOS        --no-parse-special  special text is text
//   --no-special        both of the above         --render-special    decode control tokens
//   --batch             stdin holds NUL-terminated records; one output line per record
//                       (with --decode: records are lines of ids, outputs end in NUL)
//   --stream            decode through IncrementalDetokenizer, one hex chunk per line
//   --info              print the vocabulary's kind, size and special ids
//   --time              print the encode time in milliseconds to stderr
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Options {
  std::string path;
  bool add_special = true, parse_special = true, render_special = false;
  bool decode = false, batch = false, stream = false, info = false, time = false;
};

int usage(const char* msg) {
  fmt::print(stderr, "pagoda-tokenize-tool: {}\nusage: pagoda-tokenize-tool FILE.gguf "
             "[--no-special|--no-add-special|--no-parse-special] [--decode] "
             "[--render-special] [--batch] [--stream] [--info] [--time]\n", msg);
  return 2;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  long long v;
  while (in >> v) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

void print_info(const pagoda::Tokenizer& tok) {
  const pagoda::Vocab& v = tok.vocab();
  fmt::print("kind {}\npre {}\nsize {}\nbos {}\neos {}\nunk {}\npad {}\neot {}\neog {}\n"
             "add_bos {}\nadd_eos {}\nadd_space_prefix {}\n",
             pagoda::tokenizer_kind_name(v.kind), v.pre,
             tok.vocab_size(), v.bos, v.eos, v.unk, v.pad, v.eot, join_ids(v.eog), v.add_bos,
             v.add_eos, v.add_space_prefix);
}

std::string stream_decode(const pagoda::Tokenizer& tok, const std::vector<int32_t>& ids) {
  pagoda::IncrementalDetokenizer detok(tok);
  std::string out;
  auto emit = [&](const std::string& chunk) {
    std::string hex;
    for (unsigned char c : chunk) hex += fmt::format("{:02x}", c);
    out += hex + '\n';
  };
  for (int32_t id : ids) emit(detok.push(id));
  emit(detok.flush());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-special") {
      o.add_special = o.parse_special = false;
    } else if (a == "--no-add-special") {
      o.add_special = false;
    } else if (a == "--no-parse-special") {
      o.parse_special = false;
    } else if (a == "--render-special") {
      o.render_special = true;
    } else if (a == "--decode") {
      o.decode = true;
    } else if (a == "--batch") {
      o.batch = true;
    } else if (a == "--stream") {
      o.stream = true;
    } else if (a == "--info") {
      o.info = true;
    } else if (a == "--time") {
      o.time = true;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option " + a).c_str());
    } else if (o.path.empty()) {
      o.path = a;
    } else {
      return usage("more than one file given");
    }
  }
  if (o.path.empty()) return usage("no GGUF file given");

  auto file = pagoda::GgufFile::open(o.path);
  if (!file) {
    fmt::print(stderr, "error: {}\n", file.status().message());
    return 1;
  }
  auto tok_or = pagoda::Tokenizer::from_gguf(*file);
  if (!tok_or) {
    fmt::print(stderr, "error: {}\n", tok_or.status().message());
    return 1;
  }
  const pagoda::Tokenizer& tok = **tok_or;
  if (o.info) {
    print_info(tok);
    return 0;
  }

  std::ios::sync_with_stdio(false);
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());

  if (o.decode) {
    std::vector<std::string> records;
    if (o.batch) {
      std::istringstream in(input);
      for (std::string line; std::getline(in, line);) records.push_back(line);
    } else {
      records.push_back(input);
    }
    std::string out;
    for (const std::string& r : records) {
      const std::vector<int32_t> ids = parse_ids(r);
      out += o.stream ? stream_decode(tok, ids) : tok.decode(ids, o.render_special);
      if (o.batch) out += '\0';
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  }

  std::vector<std::string> texts;
  if (o.batch) {
    size_t start = 0;
    for (size_t i = 0; i < input.size(); ++i) {
      if (input[i] == '\0') {
        texts.push_back(input.substr(start, i - start));
        start = i + 1;
      }
    }
    if (start < input.size()) texts.push_back(input.substr(start));
  } else {
    texts.push_back(input);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string out;
  for (const std::string& t : texts) {
    out += join_ids(tok.encode(t, o.add_special, o.parse_special));
    out += '\n';
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (o.time) {
    fmt::print(stderr, "encode_ms {:.3f}\n", std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
