"""`python -m dpspec.cli.main`."""
from dpspec.cli.main.main import main

main()
