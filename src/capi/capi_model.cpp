// C ABI of the platform model: a platform file (or the embedded default) as the model reads it.
#include <cstdlib>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "capi_common.hpp"
#include "xstage/model/error.hpp"
#include "xstage/model/platform.hpp"

extern "C" int xstage_platform_json(const char* path, char** out) {
  using namespace xstage::capi;
  if (!out) return fail(XSTAGE_ERR_VALUE, "xstage_platform_json: null out");
  *out = nullptr;
  return guarded([&] {
    try {
      const xstage::model::Platform p = xstage::model::load_platform_or_default(path ? path : "");
      const std::string text = xstage::model::platform_to_json(p).dump(2);
      char* copy = static_cast<char*>(std::malloc(text.size() + 1));
      if (!copy) return fail(XSTAGE_ERR_INTERNAL, "out of host memory");
      std::memcpy(copy, text.c_str(), text.size() + 1);
      *out = copy;
      return ok();
    } catch (const xstage::InputError& e) {
      return fail(XSTAGE_ERR_VALUE, e.what());
    }
  });
}
