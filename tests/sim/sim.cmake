# The deterministic simulator (label sim): the real ps_rcore over simulated
# disks and network. The mutation runs pass only if the checker catches a
# known-bad core (ps_rcore's test-only mutations).
add_executable(sim_repl ${CMAKE_CURRENT_LIST_DIR}/sim_repl.c
                        ${CMAKE_CURRENT_LIST_DIR}/sim_net.c)
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
                     PROPERTIES LABELS sim TIMEOUT 400)

# Failover: ps_rcore nodes and one ms_rcore with crashes, pauses, master
# restarts; the mutation runs use ms_rcore's and ps_rcore's test-only
# mutations.
add_executable(sim_failover ${CMAKE_CURRENT_LIST_DIR}/sim_failover.c
                            ${CMAKE_CURRENT_LIST_DIR}/sim_net.c)
target_link_libraries(sim_failover PRIVATE ps ms)
add_test(NAME sim_failover COMMAND sim_failover)
add_test(NAME sim_failover_mut_choose_min
         COMMAND sim_failover --mutate choose-min --expect P3)
add_test(NAME sim_failover_mut_no_seal
         COMMAND sim_failover --mutate no-seal --expect P7)
add_test(NAME sim_failover_mut_append_after_seal
         COMMAND sim_failover --mutate append-after-seal --expect P6)
add_test(NAME sim_failover_mut_shrink_early
         COMMAND sim_failover --mutate shrink-early --expect P1)
add_test(NAME sim_failover_mut_learner_early
         COMMAND sim_failover --mutate learner-early --expect P1)
add_test(NAME sim_failover_mut_resume_restarted
         COMMAND sim_failover --mutate resume-restarted --expect P3)
set_tests_properties(sim_failover sim_failover_mut_choose_min
                     sim_failover_mut_no_seal
                     sim_failover_mut_append_after_seal
                     sim_failover_mut_shrink_early
                     sim_failover_mut_learner_early
                     sim_failover_mut_resume_restarted
                     PROPERTIES LABELS sim TIMEOUT 400)
