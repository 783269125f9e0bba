#include "cli/base_url.h"

#include <algorithm>

#include "base/printable.h"

namespace pagoda {

Result<BaseUrl> parse_base_url(const std::string& url, const std::string& flag) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return error("{} {}: expected http://host[:port][/path]", flag, in_quotes(url));
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    return error("{} {}: scheme {} is not supported (http or https)", flag, in_quotes(url), in_quotes(scheme));
  const size_t host_begin = scheme_end + 3;
  const size_t path_begin = std::min(url.find('/', host_begin), url.size());
  if (path_begin == host_begin) return error("{} {}: no host", flag, in_quotes(url));
  BaseUrl b{url.substr(0, path_begin), url.substr(path_begin)};
  while (!b.api_root.empty() && b.api_root.back() == '/') b.api_root.pop_back();
  if (b.api_root.size() < 3 || b.api_root.compare(b.api_root.size() - 3, 3, "/v1") != 0) b.api_root += "/v1";
  return b;
}

}  // namespace pagoda
