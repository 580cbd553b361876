# unit tests: ps (rt_unit_test(name libs...))
rt_unit_test(test_ps_store ps)
rt_unit_test(test_ps_server ps)
rt_unit_test(test_ps_move ps)
rt_unit_test(test_ps_crc ps)
rt_unit_test(test_ps_rcore ps)
rt_unit_test(test_ps_repl ps)
rt_unit_test(test_ps_lease ps)
rt_unit_test(test_ps_keylog ps)
rt_unit_test(test_ps_gwait ps)
rt_unit_test(test_ps_rstream ps)
# test_ps_move also runs real rt-partition-server processes (SIGKILL
# scenarios) next to its in-process ones.
add_dependencies(test_ps_move rt-partition-server)
target_compile_definitions(test_ps_move PRIVATE
  RT_PS_BINARY="$<TARGET_FILE:rt-partition-server>")
set_tests_properties(test_ps_move PROPERTIES TIMEOUT 300)
# test_ps_server runs the binary for its flag checks (--heartbeat-ms).
add_dependencies(test_ps_server rt-partition-server)
target_compile_definitions(test_ps_server PRIVATE
  RT_PS_BINARY="$<TARGET_FILE:rt-partition-server>")
