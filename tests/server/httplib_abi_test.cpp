// cpp-httplib is a compiled library (Debian's libcpp-httplib.so) whose classes change
// layout with the features it was built with (TLS, zlib, brotli). Pagoda's objects must
// see the layout the library has, or a Client built on Pagoda's stack is smaller than
// what the library's constructor writes.
#include <httplib.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <new>

namespace pagoda::testing {
size_t library_sizeof_client();
size_t library_sizeof_request();
size_t library_sizeof_response();
size_t library_sizeof_server();
}  // namespace pagoda::testing

namespace pagoda {
namespace {

TEST(HttplibAbi, ClassSizesMatchTheLibraryBuildFlags) {
  EXPECT_EQ(sizeof(httplib::Client), testing::library_sizeof_client());
  EXPECT_EQ(sizeof(httplib::Request), testing::library_sizeof_request());
  EXPECT_EQ(sizeof(httplib::Response), testing::library_sizeof_response());
  EXPECT_EQ(sizeof(httplib::Server), testing::library_sizeof_server());
}

// The library's own constructor and destructor (compiled into the .so) run on an object
// of Pagoda's size; they must not write past it.
TEST(HttplibAbi, LibraryClientConstructorStaysInsidePagodasObject) {
  constexpr size_t kGuard = 64;
  constexpr unsigned char kCanary = 0xa5;
  alignas(httplib::Client) unsigned char buffer[sizeof(httplib::Client) + kGuard];
  std::memset(buffer, kCanary, sizeof(buffer));
  auto* client = new (buffer) httplib::Client("127.0.0.1", 9);
  client->~Client();
  for (size_t i = sizeof(httplib::Client); i < sizeof(buffer); ++i)
    ASSERT_EQ(buffer[i], kCanary) << "the library wrote byte " << i << " of an object of "
                                  << sizeof(httplib::Client) << " bytes";
}

}  // namespace
}  // namespace pagoda
