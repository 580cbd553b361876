# Layout gates (label gate): checks on the shape of the tree, not on
# behaviour.
#   configure_line1    README line 1 configures and builds (Release) on a machine without the
#                      test-only packages (cmocka hidden from pkg-config)
add_test(NAME gate_configure_line1
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check-configure-no-test-deps.sh
          ${CMAKE_CURRENT_BINARY_DIR}/gate-configure)
set_tests_properties(gate_configure_line1 PROPERTIES LABELS gate TIMEOUT 600)

#   cycles             no two files of one component's library call each
#                      other in a circle (check-cycles.py reads `nm`); the
#                      selftest shows the check catches one
add_test(NAME gate_cycles
  COMMAND ${RT_INTEGRATION_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check-cycles.py
          --nm ${CMAKE_NM}
          $<TARGET_FILE:rt> $<TARGET_FILE:rt_lmdb> $<TARGET_FILE:rt_http>
          $<TARGET_FILE:rtload> $<TARGET_FILE:th> $<TARGET_FILE:th_ms>
          $<TARGET_FILE:ms> $<TARGET_FILE:fe> $<TARGET_FILE:ps>)
set_tests_properties(gate_cycles PROPERTIES LABELS gate TIMEOUT 60)
add_test(NAME gate_cycles_selftest
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check-cycles-selftest.sh
          ${RT_INTEGRATION_PYTHON} ${CMAKE_C_COMPILER} ${CMAKE_NM}
          ${CMAKE_CURRENT_BINARY_DIR}/cycles-selftest)
set_tests_properties(gate_cycles_selftest PROPERTIES LABELS gate TIMEOUT 60)
