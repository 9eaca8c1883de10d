// The planner's typed C ABI (include/xstage/planner/planner_c_api.h) over requests.hpp.
#include "xstage/planner/planner_c_api.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>

#include "xstage/planner/moe_plan.hpp"
#include "xstage/planner/plan.hpp"
#include "xstage/planner/requests.hpp"

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

// Runs one command: request text -> output JSON text; bad input (the request, a file it names) is 2.
template <class F>
int run(const char* command, const char* request_json, char** response, char** error, F&& output) {
  if (response) *response = nullptr;
  if (error) *error = nullptr;
  if (!response) return answer(response, error, 1, std::string(command) + ": response: a null pointer");
  try {
    if (!request_json) return answer(response, error, 2, std::string(command) + ": request: a null pointer");
    const nlohmann::json request = nlohmann::json::parse(request_json);
    return answer(response, error, 0, output(request).dump(2));
  } catch (const nlohmann::json::parse_error& e) {
    return answer(response, error, 2, std::string(command) + ": request: not valid JSON (" + e.what() + ")");
  } catch (const xstage::InputError& e) {
    return answer(response, error, 2, e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    return answer(response, error, 2, e.path1().string() + ": " + e.code().message());
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

extern "C" void xstage_planner_free(char* text) { std::free(text); }
