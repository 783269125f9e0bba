// A server's base URL as OpenAI clients take it (`bench serve --base-url`, `doctor
// --server`): http(s)://host[:port] with an optional path, the API root (".../v1", added
// when the path does not end in it).
#pragma once

#include <string>

#include "base/status.h"

namespace pagoda {

struct BaseUrl {
  std::string origin;    // scheme://host:port, what httplib::Client connects to
  std::string api_root;  // e.g. /v1 or /proxy/v1
};

// `flag` names the option in the error messages.
Result<BaseUrl> parse_base_url(const std::string& url, const std::string& flag);

}  // namespace pagoda
