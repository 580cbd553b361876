# integration tests (pytest against real processes)
