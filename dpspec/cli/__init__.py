"""The command line, on top of every stage (`dpspec = dpspec.cli.main.main:main`)."""
