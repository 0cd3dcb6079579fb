"""What a TopDown run releases (the microdata and measurements tables, streamed a piece at a time)
and what its reports show of it (the budget section, the allocation and the accuracy)."""
