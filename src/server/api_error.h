// An error as the OpenAI API reports it: an HTTP status and a JSON body
// {"error": {"message", "type", "param", "code"}}, so clients' error handling works
// unchanged (the openai package raises BadRequestError, AuthenticationError, ...).
#pragma once

#include <string>

namespace pagoda {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, if any
  std::string code;

  static ApiError bad_request(std::string message, std::string param = {}) {
    return ApiError{400, std::move(message), "invalid_request_error", std::move(param), {}};
  }
  // The JSON body.
  std::string body() const;
};

}  // namespace pagoda
