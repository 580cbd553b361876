# unit tests: common (rt_unit_test(name libs...))
