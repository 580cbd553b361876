# unit tests: ps (rt_unit_test(name libs...))
rt_unit_test(test_ps_store ps)
rt_unit_test(test_ps_server ps)
