// The planner's typed C ABI (include/xstage/planner/planner_c_api.h) over requests.hpp.
#include "xstage/planner/planner_c_api.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>

#include "xstage/planner/fit.hpp"
#include "xstage/planner/moe_plan.hpp"
#include "xstage/planner/plan.hpp"
#include "xstage/planner/requests.hpp"
#include "xstage/planner/text.hpp"

namespace {

// malloc'ed copy, or null when out of memory.
char* copy_out(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

int answer(char** response, char** error, int code, const std::string& text) {
  char* copy = copy_out(text);
  if (!copy) {
    if (error) *error = copy_out("out of host memory");
    return 1;
  }
  if (code == 0) {
    if (response) *response = copy; else std::free(copy);
  } else {
    if (error) *error = copy; else std::free(copy);
  }
  return code;
}

// The request text parsed. Text that is not JSON (a syntax error, invalid UTF-8, a number beyond a double's range) is
// an InputError naming the top-level argument whose value was being read, with the parser's message escaped and
// bounded (it quotes the text it stopped at).
nlohmann::json parse_request(const char* command, const char* text) {
  std::string key;  // the top-level argument whose value is being read ("" between arguments)
  const auto track = [&key](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (depth == 1) {
      if (event == Event::key)
        key = parsed.get<std::string>();
      else if (event == Event::value || event == Event::object_end || event == Event::array_end)
        key.clear();
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, track);
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range: a number overflow
    throw xstage::InputError(std::string(command) + ": request: not valid JSON" +
                             (key.empty() ? "" : " in the value of " + xstage::planner::shown_text(key, 80)) + " (" +
                             xstage::planner::one_line(e.what(), 300) + ")");
  }
}

// Runs one command: request text -> output JSON text; bad input (the request, a file it names) is 2.
template <class F>
int run(const char* command, const char* request_json, char** response, char** error, F&& output) {
  if (response) *response = nullptr;
  if (error) *error = nullptr;
  if (!response) return answer(response, error, 1, std::string(command) + ": response: a null pointer");
  try {
    if (!request_json) return answer(response, error, 2, std::string(command) + ": request: a null pointer");
    const nlohmann::json request = parse_request(command, request_json);
    return answer(response, error, 0, output(request).dump(2));
  } catch (const xstage::InputError& e) {
    return answer(response, error, 2, e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    return answer(response, error, 2,
                  xstage::planner::shown_text(e.path1().string(), 240) + ": " + xstage::planner::shown_text(e.code().message(), 120));
  } catch (const std::bad_alloc&) {
    return answer(response, error, 1, "out of host memory");
  } catch (const std::exception& e) {
    return answer(response, error, 1, e.what());
  } catch (...) {
    return answer(response, error, 1, "unknown C++ exception");
  }
}

}  // namespace

extern "C" int xstage_planner_c_api_version(void) { return XSTAGE_PLANNER_C_API_VERSION; }

extern "C" int xstage_planner_model(const char* request_json, char** response_json, char** error) {
  return run("model", request_json, response_json, error,
             [](const nlohmann::json& r) { return xstage::planner::model_output(r); });
}

extern "C" int xstage_planner_simulate(const char* request_json, char** response_json, char** error) {
  return run("simulate", request_json, response_json, error,
             [](const nlohmann::json& r) { return xstage::planner::simulate_output(r); });
}

extern "C" int xstage_planner_plan(const char* request_json, char** response_json, char** error) {
  return run("plan", request_json, response_json, error,
             [](const nlohmann::json& r) { return xstage::planner::plan_output(r); });
}

extern "C" int xstage_planner_plan_attn(const char* request_json, char** response_json, char** error) {
  return run("plan attn", request_json, response_json, error,
             [](const nlohmann::json& r) { return xstage::planner::plan_attn_output(r); });
}

extern "C" int xstage_planner_plan_moe(const char* request_json, char** response_json, char** error) {
  return run("plan moe", request_json, response_json, error,
             [](const nlohmann::json& r) { return xstage::planner::plan_moe_output(r); });
}

extern "C" int xstage_planner_fit(const char* request_json, char** response_json, char** error) {
  return run("fit", request_json, response_json, error,
             [](const nlohmann::json& r) { return xstage::planner::fit_output(r); });
}

extern "C" int xstage_planner_fidelity(const char* request_json, char** response_json, char** error) {
  return run("fidelity", request_json, response_json, error,
             [](const nlohmann::json& r) { return xstage::planner::fidelity_output(r); });
}

extern "C" void xstage_planner_free(char* text) { std::free(text); }
