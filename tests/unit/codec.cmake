# unit tests: codec (rt_unit_test(name libs...))
