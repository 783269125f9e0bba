#include "hub/wheel_archive.h"

#include <zip.h>

#include <vector>

namespace pagoda {

struct WheelArchive::Impl {
  zip_t* zip = nullptr;
  ~Impl() {
    if (zip != nullptr) zip_discard(zip);
  }
};

WheelArchive::WheelArchive(WheelArchive&&) noexcept = default;
WheelArchive& WheelArchive::operator=(WheelArchive&&) noexcept = default;
WheelArchive::~WheelArchive() = default;

Result<WheelArchive> WheelArchive::open(const std::string& path) {
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (z == nullptr) {
    zip_error_t err;
    zip_error_init_with_code(&err, code);
    std::string msg = zip_error_strerror(&err);
    zip_error_fini(&err);
    return error("{} is not a readable wheel: {}", path, msg);
  }
  WheelArchive w;
  w.impl_ = std::make_unique<Impl>();
  w.impl_->zip = z;
  w.path_ = path;
  return w;
}

std::vector<std::string> WheelArchive::member_names() const {
  std::vector<std::string> names;
  const zip_int64_t n = zip_get_num_entries(impl_->zip, 0);
  for (zip_int64_t i = 0; i < n; ++i)
    if (const char* name = zip_get_name(impl_->zip, static_cast<zip_uint64_t>(i), 0)) names.emplace_back(name);
  return names;
}

Result<uint64_t> WheelArchive::member_size(const std::string& name) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(impl_->zip, name.c_str(), 0, &st) != 0 || (st.valid & ZIP_STAT_SIZE) == 0)
    return error("{} has no member {}", path_, name);
  return static_cast<uint64_t>(st.size);
}

Status WheelArchive::read_member(const std::string& name,
                                 const std::function<Status(const char*, size_t)>& sink) const {
  zip_file_t* f = zip_fopen(impl_->zip, name.c_str(), 0);
  if (f == nullptr) return error("{} has no member {}: {}", path_, name, zip_strerror(impl_->zip));
  std::vector<char> buf(1 << 20);
  Status st;
  for (;;) {
    const zip_int64_t n = zip_fread(f, buf.data(), buf.size());
    if (n < 0) {
      st = error("{}: reading {} failed: {} (the download is damaged)", path_, name, zip_file_strerror(f));
      break;
    }
    if (n == 0) break;
    st = sink(buf.data(), static_cast<size_t>(n));
    if (!st) break;
  }
  zip_fclose(f);
  return st;
}

}  // namespace pagoda
