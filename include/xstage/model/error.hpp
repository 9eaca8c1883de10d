// Errors from bad input (files, arguments): the message names the field and the offending value.
#pragma once

#include <stdexcept>
#include <string>

namespace xstage {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace xstage
