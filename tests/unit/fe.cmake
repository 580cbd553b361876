# unit tests: fe (rt_unit_test(name libs...))
