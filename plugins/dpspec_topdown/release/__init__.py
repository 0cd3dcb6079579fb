"""What a TopDown run releases: the microdata and measurements tables, streamed a piece at a time."""
