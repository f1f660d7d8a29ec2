"""The command line: the only layer that prints, writes files or exits."""
