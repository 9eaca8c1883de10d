# Writes the git revision header for provenance. Runs at every build (a custom target, not at
# configure time) and rewrites the file only when the revision changed, so it is never stale and
# never forces needless recompiles.
execute_process(COMMAND git -C "${SRC_DIR}" rev-parse HEAD OUTPUT_VARIABLE rev
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0)
  set(rev "unknown")
endif()
execute_process(COMMAND git -C "${SRC_DIR}" describe --always --dirty --abbrev=12 OUTPUT_VARIABLE desc
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc2 ERROR_QUIET)
if(NOT rc2 EQUAL 0)
  set(desc "unknown")
endif()
if(desc MATCHES "-dirty$")
  set(rev "${rev}-dirty")
endif()
set(content "// Generated at build time by src/gpu/git_revision.cmake. Do not edit.
#pragma once
inline constexpr const char* kXstageGitRevision = \"${rev}\";
inline constexpr const char* kXstageGitDescribe = \"${desc}\";
")
set(old "")
if(EXISTS "${OUT_FILE}")
  file(READ "${OUT_FILE}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT_FILE}" "${content}")
endif()
