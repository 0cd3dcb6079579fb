"""`dpspec sweep`: one spec run over a grid of its mechanism's numeric parameters.

    --vary NAME=VALUES ...  --grid--> points --override + check--> one checked spec per point
    data (loaded once) + each point --budget calculus, expected error, runs--> figures
    figures --report--> grid CSV, public report (budget, expected error), internal report (realized error)

A point's spec is the original IR with one parameter replaced and checked again by the same
checker as any spec, so a swept value is refused exactly where a written one would be.
"""
