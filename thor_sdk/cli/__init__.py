"""The ``thor-sdk`` command line: one module per command, each a thin layer over the library."""
