# cmake -DCASE=<name> -P link_arrows_check.cmake: runs cmake/XstageLinkArrows.cmake's check over a fake link
# graph (XSTAGE_LINK_GRAPH_<target>: its direct links). test_link_arrows.cpp runs every case and expects
# "good" to pass and the others to stop with the offending arrow named.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/XstageLinkArrows.cmake)

# The shape of the real graph: kernel libraries over gpu/comm/model; the simulator, testing and bench
# libraries beside or above them.
set(XSTAGE_LINK_GRAPH_xstage_model "nlohmann_json::nlohmann_json")
set(XSTAGE_LINK_GRAPH_xstage_sim "xstage_model")
set(XSTAGE_LINK_GRAPH_xstage_gpu "CUDA::cudart_static")
set(XSTAGE_LINK_GRAPH_xstage_comm "xstage_gpu;xstage_model")
set(XSTAGE_LINK_GRAPH_xstage_attn "CUDA::cudart_static;xstage_gpu")
set(XSTAGE_LINK_GRAPH_xstage_moe "xstage_routing;xstage_comm;xstage_gpu;xstage_model")
set(XSTAGE_LINK_GRAPH_xstage_probe_plan "xstage_model")
set(XSTAGE_LINK_GRAPH_xstage_probe "xstage_probe_plan;xstage_comm;xstage_gpu;xstage_model")
set(XSTAGE_LINK_GRAPH_xstage_testing "xstage_model;xstage_routing")
set(XSTAGE_LINK_GRAPH_xstage_bench_moe_layers "xstage_moe;xstage_comm;xstage_gpu;xstage_model;xstage_bench_cublas")
set(XSTAGE_LINK_GRAPH_xstage_bench_moe "xstage_testing;xstage_bench_moe_layers;xstage_moe;xstage_sim")
set(XSTAGE_LINK_GRAPH_xstage_planner "xstage_model;xstage_sim;xstage_routing")
set(XSTAGE_LINK_GRAPH_xstage_cli_core "xstage_planner;xstage_testing;xstage_bench_moe")
set(XSTAGE_LINK_GRAPH_xstage_cli_library "xstage_cli_core")
set(XSTAGE_LINK_GRAPH_xstage_capi "xstage_model;xstage_planner;xstage_moe")

if(CASE STREQUAL "good")
elseif(CASE STREQUAL "kernel_links_sim")             # direct: xstage_moe -> xstage_sim
  set(XSTAGE_LINK_GRAPH_xstage_moe "xstage_routing;xstage_comm;xstage_sim")
elseif(CASE STREQUAL "kernel_reaches_testing")       # transitive: xstage_probe -> xstage_comm -> xstage_testing
  set(XSTAGE_LINK_GRAPH_xstage_comm "xstage_gpu;$<LINK_ONLY:xstage_testing>")
elseif(CASE STREQUAL "kernel_reaches_bench")         # transitive, two steps: xstage_attn -> x -> y -> bench
  set(XSTAGE_LINK_GRAPH_xstage_attn "xstage_gpu;helper_a")
  set(XSTAGE_LINK_GRAPH_helper_a "helper_b")
  set(XSTAGE_LINK_GRAPH_helper_b "xstage_bench_moe")
elseif(CASE STREQUAL "capi_links_cli")               # the C ABI through the planner to the CLI core
  set(XSTAGE_LINK_GRAPH_xstage_planner "xstage_model;xstage_cli_core")
elseif(CASE STREQUAL "capi_reaches_testing")         # the C ABI through a kernel library to the bench drivers
  set(XSTAGE_LINK_GRAPH_xstage_moe "xstage_routing;xstage_comm;xstage_bench_moe")
else()
  message(FATAL_ERROR "link_arrows_check.cmake: unknown CASE '${CASE}'")
endif()

xstage_check_link_arrows()
message(STATUS "link arrows: all point down")
