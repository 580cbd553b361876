# unit tests: rt-load's pure parts (tools/rt-load)
foreach(t test_load_hist test_load_keys test_load_spec test_load_auth
          test_load_http)
  rt_unit_test(${t} rtload)
endforeach()
