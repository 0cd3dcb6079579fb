"""What TopDown measures and how: the budget allocation over levels and queries, the detailed
histogram and its marginals, and each node's discrete Gaussian noise (drawn where the node is solved)."""
