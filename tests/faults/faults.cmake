# fault harness (Python, real processes; docs/DESIGN-replication.md §11.3)
#
# Included from tests/CMakeLists.txt, so paths are relative to this file.
#   faults_check_unit  the checkers (check.py) on hand-written histories
#                      (pytest; no cluster, under a second)
#   faults_fproxy_unit the fault proxy (fproxy.py) on loopback sockets
#                      (pytest; no cluster, a few seconds)
#   faults_quick       faults.py --quick: kill-ps, kill-master, pause-ps,
#                      moves-under-faults, cut-fe-link, ≥ 2000 operations
#                      and 3 faults each (about 80 s on 2 cores); seed 1 so a
#                      failure replays (faults.py --seed N for others)
#   faults_masters_quick faults.py --masters-quick: three masters, kill
#                      -9 and isolation of the leader, two of three down
#   faults_rf3_quick   faults.py --rf3-quick: kill-primary, kill-secondary,
#                      pause-primary, flip-bits at replication factor 3, ≥ 2000
#                      operations and one fault each (≤ 90 s); SKIPPED (exit
#                      77) while the master has no --failover-after-ms or
#                      the partition server no --lease-ms, i.e. no
#                      automatic failover; never passed silently
#
# faults.py --full (≥ 10 000 operations per scenario) is run by hand; see
# faults/README.md.

add_test(NAME faults_check_unit
  COMMAND ${RT_INTEGRATION_PYTHON} -m pytest -q -p no:cacheprovider
          ${CMAKE_CURRENT_LIST_DIR}/test_check.py
  WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
set_tests_properties(faults_check_unit PROPERTIES
  LABELS faults
  TIMEOUT 60
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")

add_test(NAME faults_fproxy_unit
  COMMAND ${RT_INTEGRATION_PYTHON} -m pytest -q -p no:cacheprovider
          ${CMAKE_CURRENT_LIST_DIR}/test_fproxy.py
  WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
set_tests_properties(faults_fproxy_unit PROPERTIES
  LABELS faults
  TIMEOUT 60
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1;NO_PROXY=127.0.0.1,localhost")

add_test(NAME faults_quick
  COMMAND ${RT_INTEGRATION_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/faults.py
          --quick --seed 1
          --workdir ${CMAKE_CURRENT_BINARY_DIR}/tmp-faults
  WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
set_tests_properties(faults_quick PROPERTIES
  LABELS faults
  TIMEOUT 600
  ENVIRONMENT "RT_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1;NO_PROXY=127.0.0.1,localhost"
  # Real clusters: never side by side with the integration tests.
  RESOURCE_LOCK rt_integration)

add_test(NAME faults_rf3_quick
  COMMAND ${RT_INTEGRATION_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/faults.py
          --rf3-quick --seed 1
          --workdir ${CMAKE_CURRENT_BINARY_DIR}/tmp-faults
  WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
set_tests_properties(faults_rf3_quick PROPERTIES
  LABELS faults
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "RT_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1;NO_PROXY=127.0.0.1,localhost"
  RESOURCE_LOCK rt_integration)

add_test(NAME faults_masters_quick
  COMMAND ${RT_INTEGRATION_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/faults.py
          --masters-quick --seed 1
          --workdir ${CMAKE_CURRENT_BINARY_DIR}/tmp-faults
  WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
set_tests_properties(faults_masters_quick PROPERTIES
  LABELS faults
  TIMEOUT 400
  ENVIRONMENT "RT_BUILD_DIR=${CMAKE_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1;NO_PROXY=127.0.0.1,localhost"
  RESOURCE_LOCK rt_integration)

# stall-primary's LD_PRELOAD shim (stallshim.c): fsync/fdatasync block
# while a flag file names the process. Plain C, no sanitizer (it is
# preloaded into sanitized daemons with verify_asan_link_order=0).
add_library(rt_stallshim SHARED ${CMAKE_CURRENT_LIST_DIR}/stallshim.c)
target_compile_options(rt_stallshim PRIVATE -fno-sanitize=all)
target_link_options(rt_stallshim PRIVATE -fno-sanitize=all)
target_link_libraries(rt_stallshim PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(rt_stallshim PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
