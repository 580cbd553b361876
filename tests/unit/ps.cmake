# unit tests: ps (rt_unit_test(name libs...))
