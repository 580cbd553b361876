# The deterministic simulator (label sim): the real ps_rcore over simulated
# disks and network. The mutation runs pass only if the checker catches a
# known-bad core (ps_rcore's test-only mutations).
add_executable(sim_repl ${CMAKE_CURRENT_LIST_DIR}/sim_repl.c)
target_link_libraries(sim_repl PRIVATE ps)
add_test(NAME sim_repl COMMAND sim_repl)
add_test(NAME sim_repl_mut_ack_primary_only
         COMMAND sim_repl --mutate ack-primary-only --expect P2)
add_test(NAME sim_repl_mut_accept_gap
         COMMAND sim_repl --mutate accept-gap --expect P3)
add_test(NAME sim_repl_mut_no_resend
         COMMAND sim_repl --mutate no-resend --expect live)
set_tests_properties(sim_repl sim_repl_mut_ack_primary_only
                     sim_repl_mut_accept_gap sim_repl_mut_no_resend
                     PROPERTIES LABELS sim TIMEOUT 120)
