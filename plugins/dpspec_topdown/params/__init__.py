"""TopDown's settings read from the plain values the core resolved against the schema, and
checked together: each problem carries the path of what it is about (the core turns it into a
line and column), and `locate.inside` finds a word inside a string value, which no path reaches."""
