// Errors as values. Every boundary that can fail on user input (files, requests,
// allocations) returns Status or Result<T> with a message a user can act on; the
// process never aborts on bad input. Cheap to move; a success carries no string.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace pagoda {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    s.failed_ = true;
    return s;
  }
  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
  bool failed_ = false;
};

template <typename... Args>
Status error(fmt::format_string<Args...> f, Args&&... args) {
  return Status::error(fmt::format(f, std::forward<Args>(args)...));
}

// A value or the Status explaining why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.is_ok() && "Result built from an ok Status has no value");
  }
  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace pagoda

// Propagate a failed Status from the enclosing function.
#define PAGODA_TRY(expr)                    \
  do {                                      \
    ::pagoda::Status _pagoda_st = (expr);   \
    if (!_pagoda_st.is_ok()) return _pagoda_st; \
  } while (0)
