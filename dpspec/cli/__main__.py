"""`python -m dpspec.cli`: the same command line as `dpspec`."""

from dpspec.cli.main import main

main()
