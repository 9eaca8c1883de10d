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
# A build from a tree with uncommitted changes to tracked files records them: "<sha>-dirty.<first 12 hex digits
# of the SHA-256 of `git diff HEAD --binary`>", so two dirty builds of one revision are told apart and a result
# can be tied to the exact change (bench/common/provenance.py computes the same string).
if(desc MATCHES "-dirty$")
  execute_process(COMMAND git -C "${SRC_DIR}" diff HEAD --binary OUTPUT_VARIABLE diff RESULT_VARIABLE rc3 ERROR_QUIET)
  if(rc3 EQUAL 0)
    string(SHA256 diff_hash "${diff}")
    string(SUBSTRING "${diff_hash}" 0 12 diff_hash)
    set(rev "${rev}-dirty.${diff_hash}")
  else()
    set(rev "${rev}-dirty")
  endif()
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
