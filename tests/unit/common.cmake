# unit tests: common (rt_unit_test(name libs...))
rt_unit_test(test_rpc rt)
rt_unit_test(test_filter rt)
rt_unit_test(test_masters rt)
