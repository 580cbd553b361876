# unit tests: ms (rt_unit_test(name libs...))
rt_unit_test(test_ms_catalog ms)
rt_unit_test(test_ms_rpc ms)
rt_unit_test(test_ms_props ms)
