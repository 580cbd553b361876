# unit tests: rt-sim's core (tools/rt-sim)
rt_unit_test(test_sim_core rtsim)
