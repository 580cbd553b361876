# unit tests: ms (rt_unit_test(name libs...))
