# Layout gates (label gate): checks on the shape of the tree, not on
# behaviour.
#   configure_line1    README line 1 configures on a machine without the
#                      test-only packages (cmocka hidden from pkg-config)
add_test(NAME gate_configure_line1
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check-configure-no-test-deps.sh
          ${CMAKE_CURRENT_BINARY_DIR}/gate-configure)
set_tests_properties(gate_configure_line1 PROPERTIES LABELS gate TIMEOUT 300)
