// Compiled with exactly the flags cpp-httplib's pkg-config file records for the library
// (tests/CMakeLists.txt), not with Pagoda's: what the library itself sees.
#include <httplib.h>

#include <cstddef>

namespace pagoda::testing {

size_t library_sizeof_client() { return sizeof(httplib::Client); }
size_t library_sizeof_request() { return sizeof(httplib::Request); }
size_t library_sizeof_response() { return sizeof(httplib::Response); }
size_t library_sizeof_server() { return sizeof(httplib::Server); }

}  // namespace pagoda::testing
