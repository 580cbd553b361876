# unit tests: common (rt_unit_test(name libs...))
rt_unit_test(test_rpc rt)
rt_unit_test(test_filter rt)
rt_unit_test(test_masters rt)
rt_unit_test(test_tls rt)
# The same RPC cases with every connection under mutual TLS.
add_test(NAME test_rpc_over_tls COMMAND test_rpc --tls)
set_tests_properties(test_rpc_over_tls PROPERTIES LABELS unit TIMEOUT 60)
rt_unit_test(test_rpc_tls rt)
